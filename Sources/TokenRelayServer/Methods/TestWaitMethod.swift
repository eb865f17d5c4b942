import TokenRelayJSONRPC

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
