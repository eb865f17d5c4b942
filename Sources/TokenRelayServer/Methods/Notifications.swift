import TokenRelayJSONRPC

/// `exit`: exits, code 0 after `shutdown`, 1 without (LSP); acted on in read order
/// (``RelayServer/readOrderNotificationTable()``).
enum ExitNotification: DescribedMethod {
    static let method = "exit"
    static let openRPC = MethodDescription.notification(method, "Exits: code 0 after shutdown, 1 without (LSP).")
}

/// `initialized` (LSP and MCP clients send it): accepted and ignored.
enum InitializedNotification: DescribedMethod {
    static let method = "initialized"
    static let openRPC = MethodDescription.notification(method, "Accepted and ignored (LSP/MCP clients send it).")
}

/// `notifications/initialized` (MCP clients send it): accepted and ignored.
enum MCPInitializedNotification: DescribedMethod {
    static let method = "notifications/initialized"
    static let openRPC = MethodDescription.notification(method, "Accepted and ignored (MCP clients send it).")
}

/// `$/cancelRequest {id}`: handled by the dispatcher (``Dispatcher/cancelMethods``).
enum CancelRequestNotification: DescribedMethod {
    static let method = "$/cancelRequest"
    static let openRPC = MethodDescription.notification(
        method, "Cancels a request; it is answered with -32800.",
        params: [param("id", required: true, ["type": ["integer", "string"]])])
}

/// `notifications/cancelled {requestId, reason?}` (MCP spelling): handled by the dispatcher.
enum MCPCancelledNotification: DescribedMethod {
    static let method = "notifications/cancelled"
    static let openRPC = MethodDescription.notification(
        method, "Cancels a request (MCP spelling); it is answered with -32800.",
        params: [param("requestId", required: true, ["type": ["integer", "string"]]), param("reason", Schema.string)])
}

/// `auth-failed` (server to client, sent by ``RelayServer``): a renewal was refused.
enum AuthFailedNotification: DescribedMethod {
    static let method = "auth-failed"
    static let openRPC = MethodDescription.notification(
        method,
        "A renewal was refused (refresh grant or re-acquisition rejected, or excessive renewals) — distinct from a request being unauthorized.",
        params: [
            param("environment", required: true, Schema.string), param("profile", required: true, Schema.string),
            param("kind", required: true, Schema.string), param("message", Schema.string),
            param("oauthError", Schema.string), param("oauthErrorDescription", Schema.string),
        ], direction: .serverToClient)
}

/// `log` (server to client): not sent by this build yet.
enum LogNotification: DescribedMethod {
    static let method = "log"
    static let openRPC = MethodDescription.notification(
        method, "Optional log line for clients that ask for one.",
        params: [param("level", Schema.string), param("message", Schema.string)], direction: .serverToClient,
        status: "planned")
}
