import Testing

@testable import TokenRelayJSONRPC

/// What editors' own JSON-RPC clients send (SPEC §4.2): `"params": null`, `[]` for an empty
/// object, and notifications that must never be answered, even when invalid (SPEC §4.1).
@Suite struct ProtocolToleranceTests {
    @Test(arguments: [#""params":null,"#, ""])
    func paramsNullOrAbsentDecodeAsNoParams(paramsMember: String) throws {
        for idMember in [#""id":1,"#, ""] {
            let value = try JSONParser.parse(#"{"jsonrpc":"2.0",\#(idMember)\#(paramsMember)"method":"shutdown"}"#)
            guard case .request(let request) = MessageCodec.decode(value) else {
                Issue.record("not a request: \(idMember)\(paramsMember)")
                continue
            }
            #expect(request.params == nil)
            #expect(request.isNotification == idMember.isEmpty)
        }
    }

    @Test(arguments: [
        #"{"jsonrpc":"1.0","method":"exit"}"#,
        #"{"method":"exit"}"#,
        #"{"jsonrpc":"2.0","method":5}"#,
        #"{"jsonrpc":"2.0","method":null}"#,
        #"{"jsonrpc":"2.0","method":"exit","params":"s"}"#,
        #"{"jsonrpc":"2.0","method":"exit","params":7}"#,
    ])
    func invalidNotificationsAreRecognisedAsNotifications(text: String) throws {
        guard case .invalidNotification(_, let error) = MessageCodec.decode(try JSONParser.parse(text)) else {
            Issue.record("expected an invalid notification: \(text)")
            return
        }
        #expect(error.code == .invalidRequest)
    }

    @Test func theSameFaultsInARequestWithAnIDAreAnswered() throws {
        let value = try JSONParser.parse(#"{"jsonrpc":"2.0","id":"n","method":"exit","params":7}"#)
        guard case .invalid(let id, let error) = MessageCodec.decode(value) else {
            Issue.record("expected invalid")
            return
        }
        #expect(id == .string("n"))
        #expect(error.message.contains("params"))
    }

    @Test func invalidNotificationsAreNeverAnsweredAloneOrInABatch() async {
        let sink = RecordingSink()
        let dispatcher = Dispatcher(
            methods: ["ping": { _, _ in JSONValue.object([:]) }], sink: sink,
            errorMapper: RPCError.testMapper)
        for text in [
            #"{"jsonrpc":"1.0","method":"exit"}"#, #"{"jsonrpc":"2.0","method":5}"#,
            #"{"jsonrpc":"2.0","method":"exit","params":"s"}"#, #"{"jsonrpc":"2.0","method":"no/such/notification"}"#,
            #"[{"jsonrpc":"2.0","method":"exit","params":1},{"method":"x"}]"#,
            #"[{"jsonrpc":"2.0","method":"exit","params":1},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#,
            #"{"jsonrpc":"2.0","id":"last","method":"ping","params":null}"#,
        ] {
            dispatcher.receive(Array(text.utf8))
        }
        // Invalid messages are answered synchronously, so an answer to any of the notifications
        // would be recorded before the two answers the requests get.
        let messages = await sink.waitFor(2)
        await dispatcher.waitUntilIdle()
        let all = sink.messages
        #expect(all.count == 2, "\(all.map(\.jsonText))")
        let batch = messages.first { $0.arrayValue != nil }
        #expect(batch?.arrayValue?.count == 1)
        #expect(batch?.arrayValue?.first?["id"] == "b")
        #expect(messages.contains { $0["id"] == "last" && $0["result"] == .object([:]) })
    }

    @Test(arguments: [nil, JSONValue.null, .array([]), .object([:])])
    func absentNullEmptyArrayAndEmptyObjectAreNoParams(params: JSONValue?) throws {
        try ParamReader.expectNone(params)
        var reader = try ParamReader(params, allowed: ["query"])
        #expect(reader.objectValue("query") == nil)
        try reader.finish()
    }

    @Test func anEmptyArrayReadsAsAnEmptyObjectMember() throws {
        var reader = try ParamReader(["query": [], "headers": .object([:])], allowed: ["query", "headers"])
        #expect(reader.objectValue("query") == JSONObject())
        #expect(reader.objectValue("headers") == JSONObject())
        try reader.finish()
    }

    @Test func aNonEmptyArrayIsNeitherParamsNorAnObjectMember() throws {
        #expect(throws: RPCError.self) { try ParamReader(.array([1]), allowed: []) }
        #expect(throws: RPCError.self) { try ParamReader.expectNone(.array([.object([:])])) }
        var reader = try ParamReader(["query": [1]], allowed: ["query"])
        #expect(reader.objectValue("query") == nil)
        #expect(reader.diagnostics.map(\.pointer) == ["/query"])
    }

    @Test func strictReadersStillRejectUnknownMembersAndIgnoringReadersAcceptThem() throws {
        let params: JSONValue = ["processId": .null, "rootUri": "file:///x", "capabilities": [], "trace": "off"]
        #expect(throws: RPCError.self) { try ParamReader(params, allowed: ["processId"]).finish() }
        var tolerant = try ParamReader(params, allowed: ["processId"], unknownMembers: .ignore)
        #expect(tolerant.integer("processId") == nil)
        try tolerant.finish()
    }

    @Test func noCodeTokenrelaySendsTakesAMeaningLSPReserves() {
        for (code, kind) in ErrorCode.all {
            #expect(!ErrorCode.lspReserved.contains(code.rawValue), "\(kind) uses \(code.rawValue)")
            let standard = [-32700, -32600, -32601, -32602, -32603, -32800].contains(code.rawValue)
            #expect(standard || (-32099...(-32000)).contains(code.rawValue), "\(kind) outside -32000..-32099")
        }
        #expect(Set(ErrorCode.all.map(\.code.rawValue)).count == ErrorCode.all.count, "codes are distinct")
    }
}
