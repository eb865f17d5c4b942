import Testing
import TokenRelayHTTP
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// Which executor a request's task prefers (``RelayRuntime/executor(for:)``): the loop of the
/// environment it names, once that environment's transport exists.
@Suite struct RelayRuntimeExecutorTests {
    static func request(environment: String?) -> RPCRequest {
        let params: JSONValue = environment.map { .object(["environment": .string($0), "path": "/"]) } ?? ["path": "/"]
        return RPCRequest(id: .number(JSONNumber(1)), method: "request", params: params)
    }

    static func identity(_ executor: (any TaskExecutor)?) -> ObjectIdentifier? {
        executor.map { ObjectIdentifier($0 as AnyObject) }
    }

    @Test func aRequestPrefersTheLoopOfTheEnvironmentItNamesOnceThatLoopRuns() async throws {
        let settings = try await CurrentRuntimeTests.settings(["a", "b"])
        let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: "a")
        let transportA = try #require(runtime.environmentTransports["a"])
        // No transport exists yet: every request runs on the global executor.
        #expect(runtime.executor(for: Self.request(environment: "a")) == nil)
        #expect(runtime.executor(for: Self.request(environment: nil)) == nil)

        // Any transfer creates environment a's transport (port 9 refuses: the answer does not matter).
        _ = try? await transportA.send(collecting: HTTPRequest(method: "GET", url: "http://127.0.0.1:9/"))
        let loopA = try #require(Self.identity(transportA.startedExecutor))
        #expect(Self.identity(runtime.executor(for: Self.request(environment: "a"))) == loopA)
        // No environment named: the default one (here --env a).
        #expect(Self.identity(runtime.executor(for: Self.request(environment: nil))) == loopA)
        // b has no transport yet; an unknown name has none at all.
        #expect(runtime.executor(for: Self.request(environment: "b")) == nil)
        #expect(runtime.executor(for: Self.request(environment: "nowhere")) == nil)
        for transport in runtime.transports { transport.shutdown() }
    }

    @Test func onlyACallThatMakesATransferRunsOnALoop() async throws {
        let settings = try await CurrentRuntimeTests.settings(["a", "b"])
        let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: "a")
        let transportA = try #require(runtime.environmentTransports["a"])
        _ = try? await transportA.send(collecting: HTTPRequest(method: "GET", url: "http://127.0.0.1:9/"))
        let loopA = try #require(Self.identity(transportA.startedExecutor))
        // An MCP tools/call names its environment among the tool's arguments.
        let toolCall = RPCRequest(
            id: .number(JSONNumber(2)), method: "tools/call",
            params: ["name": "http_request", "arguments": ["environment": "a", "path": "/"]])
        #expect(Self.identity(runtime.executor(for: toolCall)) == loopA)
        // A reload reads files and parses YAML; a login, status or ping makes no transfer of its
        // own: none of them runs on the default environment's loop, whatever its params say.
        for method in ["config-reload", "login", "status", "ping", "subscribe", "tools/list"] {
            let call = RPCRequest(id: .number(JSONNumber(3)), method: method, params: ["environment": "a"])
            #expect(runtime.executor(for: call) == nil, "\(method)")
        }
        for transport in runtime.transports { transport.shutdown() }
    }
}
