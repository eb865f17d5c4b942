import Testing
import TokenRelayHTTP
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// Which executor a request's task prefers (``MethodPlacement`` with the server's places and
/// ``RelayRuntime/loop(forEnvironment:)``): the loop of the environment it names, once that
/// environment's transport exists.
@Suite struct RelayRuntimeExecutorTests {
    struct Loops: TransferLoops {
        let runtime: RelayRuntime
        func loop(forEnvironment name: String?) -> (any TaskExecutor)? { runtime.loop(forEnvironment: name) }
    }

    static func placement(_ runtime: RelayRuntime, mcp: Bool = false) -> MethodPlacement {
        MethodPlacement(mcp ? MCPFace.methodPlaces : RelayServer.methodPlaces(), loops: Loops(runtime: runtime))
    }

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
        let placement = Self.placement(runtime)
        #expect(placement.executor(for: Self.request(environment: "a")) == nil)
        #expect(placement.executor(for: Self.request(environment: nil)) == nil)

        // Any transfer creates environment a's transport (port 9 refuses: the answer does not matter).
        _ = try? await transportA.send(collecting: HTTPRequest(method: "GET", url: "http://127.0.0.1:9/"))
        let loopA = try #require(Self.identity(transportA.startedExecutor))
        #expect(Self.identity(placement.executor(for: Self.request(environment: "a"))) == loopA)
        // No environment named: the default one (here --env a).
        #expect(Self.identity(placement.executor(for: Self.request(environment: nil))) == loopA)
        // b has no transport yet; an unknown name has none at all.
        #expect(placement.executor(for: Self.request(environment: "b")) == nil)
        #expect(placement.executor(for: Self.request(environment: "nowhere")) == nil)
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
        #expect(Self.identity(Self.placement(runtime, mcp: true).executor(for: toolCall)) == loopA)
        // Each place is said by the method's type, beside its name.
        #expect(RequestMethod.place == .transfer(environmentAt: ["environment"]))
        #expect(RelayServer.methodPlaces().filter { $0.value != .ownTasks }.keys.sorted() == ["request"])
        // A reload reads files and parses YAML; a login, status or ping makes no transfer of its
        // own: none of them runs on the default environment's loop, whatever its params say.
        for method in ["config-reload", "login", "status", "ping", "subscribe", "tools/list"] {
            let call = RPCRequest(id: .number(JSONNumber(3)), method: method, params: ["environment": "a"])
            #expect(Self.placement(runtime).executor(for: call) == nil, "\(method)")
            #expect(Self.placement(runtime, mcp: true).executor(for: call) == nil, "\(method)")
        }
        for transport in runtime.transports { transport.shutdown() }
    }
}
