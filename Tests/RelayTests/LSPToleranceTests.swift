import Testing

@testable import TokenRelayJSONRPC
@testable import TokenRelayServer

/// The methods as editors' own clients call them (SPEC §4.2): `initialize` ignores the LSP
/// members it does not use, `null` and `[]` mean no params, `[]` is an empty object member, and
/// tokenrelay's own methods still reject unknown members.
@Suite struct LSPToleranceTests {
    static func call(_ method: String, _ params: JSONValue?) async throws -> JSONValue {
        let server = try await RelayServer.make(options: ServerOptions(), settings: .empty)
        let handler = try #require(server.methodTable()[method])
        let result = try await handler(params, RequestContext(id: .string("t"), inBatch: false, sink: DiscardingSink()))
        return try JSONParser.parse(result.serialized())
    }

    /// The `initialize` params Neovim 0.7's `vim.lsp.start_client` builds (lsp.lua), with an
    /// empty Lua table encoded as `[]`.
    static let neovimInitialize: JSONValue = [
        "processId": 4242, "rootPath": .null, "rootUri": .null, "workspaceFolders": .null,
        "initializationOptions": .null, "clientInfo": ["name": "Neovim", "version": "0.7.2"],
        "capabilities": ["textDocument": ["synchronization": ["dynamicRegistration": false]], "experimental": []],
        "trace": "off", "workDoneToken": "1", "locale": "en_US",
    ]

    @Test func initializeAcceptsAndIgnoresEveryLSPMember() async throws {
        let result = try await Self.call("initialize", Self.neovimInitialize)
        #expect(result["serverInfo"]?["name"] == "tokenrelay")
        #expect(result["protocolVersion"] == .string(RelayServer.protocolVersion))
    }

    @Test(arguments: [JSONValue.array([]), .string("any"), .int(3), .null, .object(["x": ["y": []]])])
    func initializeAcceptsCapabilitiesOfAnyShape(capabilities: JSONValue) async throws {
        let result = try await Self.call("initialize", ["processId": .null, "capabilities": capabilities])
        #expect(result["capabilities"]?["framings"] != nil)
    }

    @Test func initializeStillChecksTheMembersItUses() async throws {
        await #expect(throws: RPCError.self) { _ = try await Self.call("initialize", ["processId": "me"]) }
        await #expect(throws: RPCError.self) { _ = try await Self.call("initialize", .array([1])) }
    }

    @Test(arguments: ["shutdown", "ping", "status", "rpc.discover", "initialize"])
    func nullAndEmptyArrayMeanNoParams(method: String) async throws {
        for params in [nil, JSONValue.null, .array([]), .object([:])] {
            _ = try await Self.call(method, params)
        }
    }

    @Test func tokenrelaysOwnMethodsStayStrictAboutUnknownMembers() async throws {
        for (method, params) in [
            ("ping", ["rootUri": "file:///"]), ("status", ["capabilities": [:]]), ("shutdown", ["x": 1]),
            ("token-invalidate", ["environmnet": "dev"]),
        ] as [(String, JSONValue)] {
            do {
                _ = try await Self.call(method, params)
                Issue.record("\(method) accepted an unknown member")
            } catch let error as RPCError {
                #expect(error.code == .invalidParams, "\(method): \(error)")
            }
        }
    }

    @Test func emptyArraysAreEmptyObjectMembersOfRequestParams() throws {
        let params = try RequestParams.decode(["path": "/items", "query": [], "headers": [], "pathParams": []])
        #expect(params.query.isEmpty)
        #expect(params.headers.fields.isEmpty)
        let byURL = try RequestParams.decode(["url": "http://127.0.0.1/x", "pathParams": []])
        guard case .url = byURL.target else {
            Issue.record("expected a url target")
            return
        }
        #expect(throws: RPCError.self) { _ = try RequestParams.decode(["path": "/x", "querry": []]) }
        #expect(throws: RPCError.self) { _ = try RequestParams.decode(["path": "/x", "query": ["a"]]) }
        #expect(throws: RPCError.self) {
            _ = try RequestParams.decode(["url": "http://127.0.0.1/x", "pathParams": ["id": 1]])
        }
        let subscription = try RequestParams.decodeSubscription(["path": "/events", "query": [], "headers": []])
        #expect(subscription.query.isEmpty)
    }
}

/// A sink that drops what it is given (the handlers called here send nothing).
final class DiscardingSink: MessageSink {
    func send(_ frame: consuming [UInt8]) async {}
    func sendNow(_ frame: consuming [UInt8]) {}
}
