import JSONRPC

/// `shutdown`: the dispatcher refuses new requests from here on, in read order (kind
/// `shutting_down`); `exit` then exits with 0.
enum ShutdownMethod: RelayMethod {
    static let method = "shutdown"

    /// `null`.
    struct Result: MethodResult {
        var resultValue: JSONValue { .null }
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result { Result() }

    static let openRPC = MethodDescription(
        name: method, summary: "Stops accepting requests (they get kind shutting_down); exit then exits with 0.",
        result: ["type": "null"])
}

/// `ping`: answers `{}`.
enum PingMethod: RelayMethod {
    static let method = "ping"

    /// `{}`.
    struct Result: MethodResult {
        var resultValue: JSONValue { .object([:]) }
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result { Result() }

    static let openRPC = MethodDescription(name: method, summary: "Answers {}.", result: ["type": "object"])
}

/// `rpc.discover`: the OpenRPC document (SPEC §7: the same as `schemas/openrpc.json`).
enum DiscoverMethod: RelayMethod {
    static let method = "rpc.discover"

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> JSONValue {
        OpenRPCDocument.value
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Returns this OpenRPC document.", result: ["type": "object"])
}

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

/// `test/wait {ms?, echo?}` (test builds of the server only, `--test-methods`): waits, then
/// echoes. Not documented.
enum TestWaitMethod: RelayMethod {
    static let method = "test/wait"

    struct Params: MethodParams {
        var milliseconds: Int
        var echo: JSONValue

        init(decoding params: JSONValue?) throws(RPCError) {
            var reader = try ParamReader(params, allowed: ["ms", "echo"])
            milliseconds = reader.integer("ms", in: 0...3_600_000) ?? 3_600_000
            echo = reader.value("echo") ?? .null
            try reader.finish()
        }
    }

    static func handle(_ params: Params, in context: MethodContext) async throws -> JSONValue {
        try await Task.sleep(for: .milliseconds(params.milliseconds))
        return .object(["echo": params.echo])
    }

    static let openRPC = MethodDescription(name: method, summary: "Waits, then echoes (tests only).")
}
