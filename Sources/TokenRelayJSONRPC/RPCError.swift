import TokenRelayErrorKinds

/// One problem with a request's params: where (a JSON Pointer into the params) and why.
public struct ParamDiagnostic: Sendable, Hashable {
    /// RFC 6901 JSON Pointer into the params, e.g. `/query/b/1`; `""` for the params themselves.
    public var pointer: String
    public var reason: String

    public init(pointer: String, reason: String) {
        self.pointer = pointer
        self.reason = reason
    }

    /// Builds a pointer from path components, escaping `~` and `/` as RFC 6901 requires.
    public static func pointer(_ components: [String]) -> String {
        components.map { component in
            var escaped = "/"
            for character in component {
                switch character {
                case "~": escaped += "~0"
                case "/": escaped += "~1"
                default: escaped.append(character)
                }
            }
            return escaped
        }.joined()
    }
}

/// An error as it goes on the wire: code, message, and `data` that always carries `kind`.
/// The message must never contain a secret (callers build it from redacted text).
public struct RPCError: KindedError, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    /// Stable machine-readable kind (`data.kind`).
    public var kind: ErrorKind
    /// Further members of `data` (besides `kind`), e.g. `diagnostics`, `oauthError`.
    public var data: JSONObject

    /// An error of `code`, with the kind that code has.
    public init(code: ErrorCode, message: String, data: JSONObject = JSONObject()) {
        self.code = code
        self.message = message
        self.kind = code.kind
        self.data = data
    }

    /// An error of `kind`, sent with the code of that kind (``ErrorCode/init(kind:)``), so code
    /// and kind always agree.
    public init(kind: ErrorKind, message: String, data: JSONObject = JSONObject()) {
        self.code = ErrorCode(kind: kind)
        self.message = message
        self.kind = kind
        self.data = data
    }

    public var errorKind: ErrorKind { kind }

    /// -32602 with `data.diagnostics`.
    public static func invalidParams(_ diagnostics: [ParamDiagnostic], message: String? = nil) -> RPCError {
        let list = JSONValue.array(
            diagnostics.map { .object(["pointer": .string($0.pointer), "reason": .string($0.reason)]) })
        let text =
            message ?? diagnostics.first.map { d in
                d.pointer.isEmpty ? "invalid params: \(d.reason)" : "invalid params: \(d.pointer): \(d.reason)"
            } ?? "invalid params"
        return RPCError(code: .invalidParams, message: text, data: ["diagnostics": list])
    }

    public static func invalidRequest(_ message: String) -> RPCError {
        RPCError(code: .invalidRequest, message: message)
    }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(code: .methodNotFound, message: "method not found: \(method)")
    }
    public static func parseError(_ message: String) -> RPCError { RPCError(code: .parseError, message: message) }
    public static let cancelled = RPCError(code: .requestCancelled, message: "request cancelled")
    public static let shuttingDown = RPCError(code: .shuttingDown, message: "the server is shutting down")

    /// The `error` member of a response.
    public var jsonValue: JSONValue {
        var fullData = JSONObject()
        fullData["kind"] = .string(kind.rawValue)
        for member in data where member.key != "kind" { fullData[member.key] = member.value }
        return .object(["code": .int(code.rawValue), "message": .string(message), "data": .object(fullData)])
    }

    public var description: String { "\(code.rawValue) \(kind.rawValue): \(message)" }
}
