/// A decoded request or notification (a notification has no id).
public struct RPCRequest: Sendable {
    /// `nil` for a notification.
    public var id: RequestID?
    public var method: String
    /// `nil` when absent or `null` (both mean no params); otherwise an object or an array.
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
    /// A message with a `method` and no `id` that is not valid: a notification, so it is never
    /// answered (JSON-RPC 2.0 §4.1), only logged.
    case invalidNotification(method: String?, error: RPCError)
    /// A response to a request of ours (`tokenrelay mcp` sends `elicitation/create`): its id and
    /// its `result` or `error` member.
    case response(id: RequestID?, result: JSONValue?, error: JSONValue?)
}

/// Decoding of JSON values into messages and encoding of responses (pure).
public enum MessageCodec {
    /// Classifies one element (a whole message or one batch entry).
    public static func decode(_ value: JSONValue) -> IncomingMessage {
        guard case .object(let object) = value else {
            return .invalid(id: nil, error: .invalidRequest("a request must be a JSON object, not \(value.typeName)"))
        }
        // A message with a method and no id is a notification, and is never answered, even when
        // it is invalid (JSON-RPC 2.0 §4.1).
        if object["id"] == nil, let method = object["method"] {
            switch validate(object, method: method) {
            case .success(let (name, params)): return .request(RPCRequest(id: nil, method: name, params: params))
            case .failure(let error): return .invalidNotification(method: method.stringValue, error: error)
            }
        }
        // Keep the id if it is usable, whatever else is wrong.
        var id: RequestID?
        if let rawID = object["id"] {
            guard let parsed = RequestID(rawID) else {
                return .invalid(
                    id: nil, error: .invalidRequest("\"id\" must be a string, a number or null, not \(rawID.typeName)"))
            }
            id = parsed
        }
        guard let method = object["method"] else {
            guard object["jsonrpc"] == .string("2.0") else {
                return .invalid(id: id ?? .null, error: .invalidRequest("\"jsonrpc\" must be \"2.0\""))
            }
            if object["result"] != nil || object["error"] != nil {
                return .response(id: id, result: object["result"], error: object["error"])
            }
            return .invalid(id: id ?? .null, error: .invalidRequest("\"method\" is missing"))
        }
        switch validate(object, method: method) {
        case .success(let (name, params)): return .request(RPCRequest(id: id, method: name, params: params))
        case .failure(let error): return .invalid(id: id ?? .null, error: error)
        }
    }

    /// Checks `jsonrpc`, `method` and `params` of a request or notification. The params are `nil`
    /// when absent or `null` (how editors' clients say "no params").
    private static func validate(_ object: JSONObject, method: JSONValue) -> Result<
        (method: String, params: JSONValue?), RPCError
    > {
        guard object["jsonrpc"] == .string("2.0") else {
            return .failure(.invalidRequest("\"jsonrpc\" must be \"2.0\""))
        }
        guard case .string(let name) = method else {
            return .failure(.invalidRequest("\"method\" must be a string"))
        }
        switch object["params"] {
        case nil, .null?: return .success((name, nil))
        case .object?, .array?: return .success((name, object["params"]))
        case let params?:
            return .failure(.invalidRequest("\"params\" must be an object, an array or null, not \(params.typeName)"))
        }
    }

    /// The JSON text of a success response: the same members, in the same order, as an error
    /// response, with the result written into it as it is.
    public static func response(id: RequestID, result: any JSONWritable) -> [UInt8] {
        var output: [UInt8] = []
        // Room for a typical answer (status, a dozen headers, a small body) without regrowing.
        output.reserveCapacity(512)
        output.append(contentsOf: #"{"jsonrpc":"2.0","id":"#.utf8)
        id.jsonValue.write(into: &output)
        output.append(contentsOf: #","result":"#.utf8)
        result.write(into: &output)
        output.append(UInt8(ascii: "}"))
        return output
    }

    /// The JSON text of an error response (`id` null when unknown).
    public static func response(id: RequestID?, error: RPCError) -> [UInt8] {
        JSONValue.object(["jsonrpc": "2.0", "id": (id ?? .null).jsonValue, "error": error.jsonValue]).serialized()
    }

    /// The JSON of a notification we send.
    public static func notification(method: String, params: JSONValue) -> JSONValue {
        .object(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }
}
