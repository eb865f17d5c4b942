import JSONRPC

/// `config-reload` (also SIGHUP): see ``RelayServer/reload()``.
enum ConfigReloadMethod: RelayMethod {
    static let method = "config-reload"

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> JSONValue {
        try await context.server.reload()
    }

    /// One `{environment, profile}` pair per profile (profile absent for an environment without
    /// profiles). A changed environment lists each of its profiles as changed; lists are sorted
    /// by environment, then profile.
    private static let entries: JSONValue = [
        "type": "array",
        "items": Schema.object(
            ["environment": Schema.string, "profile": Schema.string], required: ["environment"], additional: false),
    ]

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Reloads the configuration file from the same path, with the same loader as at start (also on SIGHUP for serve). A config that fails to load changes nothing (error kind config with data.diagnostics: [{file, line, column, severity, message}]); a changed store or server section is refused the same way (data.sections; it needs a restart). Profiles are compared as written (secret sources by where they come from, not by value): unchanged ones keep their sessions, subscriptions and in-flight requests; removed ones finish their in-flight requests, new requests get unknown_environment / unknown_profile, and their subscriptions end with closed; changed ones finish their in-flight requests on the old settings, their subscriptions end with closed, and they start afresh (the held access token is not used again; refresh state is kept).",
        result: Schema.object(
            ["added": entries, "changed": entries, "removed": entries], required: ["added", "changed", "removed"],
            additional: false),
        errors: [.config] + MethodDescription.standardErrors)
}
