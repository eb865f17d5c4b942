/// A decoded request or notification (a notification has no id).
public struct RPCRequest: Sendable {
    /// `nil` for a notification.
    public var id: RequestID?
    public var method: String
    /// `nil` when absent; otherwise an object or an array.
    public var params: JSONValue?

    public init(id: RequestID?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        self.params = params
    }

    public var isNotification: Bool { id == nil }
}

/// What one JSON value received from the peer turned out to be.
public enum IncomingMessage: Sendable {
    case request(RPCRequest)
    /// A message that is not a valid request. `id` is kept when it could be read, so the error
    /// answer still reaches the caller.
    case invalid(id: RequestID?, error: RPCError)
    /// A response to a request of ours (we send none; it is ignored).
    case response
}

/// Decoding of JSON values into messages and encoding of responses (pure).
public enum MessageCodec {
    /// Classifies one element (a whole message or one batch entry).
    public static func decode(_ value: JSONValue) -> IncomingMessage {
        guard case .object(let object) = value else {
            return .invalid(id: nil, error: .invalidRequest("a request must be a JSON object, not \(value.typeName)"))
        }
        // Keep the id if it is usable, whatever else is wrong.
        var id: RequestID?
        var idProblem: String?
        if let rawID = object["id"] {
            if let parsed = RequestID(rawID) {
                id = parsed
            } else {
                idProblem = "\"id\" must be a string, a number or null, not \(rawID.typeName)"
            }
        }
        guard object["jsonrpc"] == .string("2.0") else {
            return .invalid(id: id ?? .null, error: .invalidRequest("\"jsonrpc\" must be \"2.0\""))
        }
        if let idProblem { return .invalid(id: nil, error: .invalidRequest(idProblem)) }
        guard let methodValue = object["method"] else {
            if object["result"] != nil || object["error"] != nil { return .response }
            return .invalid(id: id ?? .null, error: .invalidRequest("\"method\" is missing"))
        }
        guard case .string(let method) = methodValue else {
            return .invalid(id: id ?? .null, error: .invalidRequest("\"method\" must be a string"))
        }
        let params = object["params"]
        if let params {
            switch params {
            case .object, .array: break
            default:
                return .invalid(id: id ?? .null, error: .invalidRequest("\"params\" must be an object or an array"))
            }
        }
        return .request(RPCRequest(id: id, method: method, params: params))
    }

    /// The JSON of a success response.
    public static func response(id: RequestID, result: JSONValue) -> JSONValue {
        .object(["jsonrpc": "2.0", "id": id.jsonValue, "result": result])
    }

    /// The JSON of an error response (`id` null when unknown).
    public static func response(id: RequestID?, error: RPCError) -> JSONValue {
        .object(["jsonrpc": "2.0", "id": (id ?? .null).jsonValue, "error": error.jsonValue])
    }

    /// The JSON of a notification we send.
    public static func notification(method: String, params: JSONValue) -> JSONValue {
        .object(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }
}
