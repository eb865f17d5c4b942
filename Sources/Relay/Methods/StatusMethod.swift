import JSONRPC

/// `status`: per session its state (never a token value), the subscription count and the store.
enum StatusMethod: RelayMethod {
    static let method = "status"

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> JSONValue {
        try await context.withRuntime { try await context.tokens($0).status() }
    }

    private static let session = Schema.object(
        [
            "environment": Schema.string, "profile": Schema.string, "type": Schema.string, "state": Schema.string,
            "expiresAt": Schema.dateTime, "refreshable": Schema.boolean,
            "fromStore": [
                "type": "boolean",
                "description": "The held token was read from the store (obtained by an earlier or another process).",
            ],
            "lastError": Schema.error,
            "subject": Schema.string("Who is logged in (interactive OpenID Connect profiles)."),
            "email": Schema.string, "name": Schema.string,
            "counters": Schema.object([
                "acquisitions": Schema.integer, "renewals": Schema.integer, "recoveries": Schema.integer,
                "requests": Schema.integer,
            ]),
        ], required: ["environment", "profile", "type", "state", "refreshable", "fromStore", "counters"])

    private static let store = Schema.object(
        [
            "type": Schema.oneOf(["memory", "sqlite"]), "path": Schema.string,
            "encrypted": ["type": "boolean", "description": "false: tokens are kept in plain text in the 0600 file."],
            "schemaVersion": Schema.integer, "error": Schema.error,
        ], required: ["type", "encrypted"])

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Per session: token state, expiry, refresh availability, whether the token came from the session store, last error, counters; and the store (type, path, encrypted, schema version). Never a token value.",
        result: Schema.object(
            ["sessions": ["type": "array", "items": session], "subscriptions": Schema.integer, "store": store],
            required: ["sessions", "subscriptions", "store"]))
}
