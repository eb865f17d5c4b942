import Testing

@testable import TokenRelayJSONRPC

@Suite struct MessageCodecTests {
    @Test(arguments: [#"1"#, #"12345678901234567890"#, #""abc""#, #"-7"#, #"1.5"#, #""""#])
    func requestIDsAreEchoedExactly(idText: String) throws {
        let value = try JSONParser.parse(#"{"jsonrpc":"2.0","id":\#(idText),"method":"ping"}"#)
        guard case .request(let request) = MessageCodec.decode(value), let id = request.id else {
            Issue.record("not a request")
            return
        }
        let response = MessageCodec.response(id: id, result: JSONValue.null)
        #expect(String(decoding: response, as: UTF8.self) == #"{"jsonrpc":"2.0","id":\#(idText),"result":null}"#)
    }

    @Test func aSuccessAnswerIsTheTextOfItsTree() throws {
        let result: JSONValue = ["a": [1, "two", ["three": .null]], "b": "q\"uote\n", "c": true]
        for id in [RequestID.number(JSONNumber(7)), .string("x\"y")] {
            let tree: JSONValue = ["jsonrpc": "2.0", "id": id.jsonValue, "result": result]
            #expect(MessageCodec.response(id: id, result: result) == tree.serialized())
        }
    }

    @Test func notificationsHaveNoID() throws {
        let value = try JSONParser.parse(#"{"jsonrpc":"2.0","method":"exit"}"#)
        guard case .request(let request) = MessageCodec.decode(value) else {
            Issue.record("not a request")
            return
        }
        #expect(request.isNotification)
    }

    @Test(arguments: [
        (#"{"id":1,"method":"ping"}"#, "1"),
        (#"{"jsonrpc":"1.0","id":"x","method":"ping"}"#, #""x""#),
        (#"{"jsonrpc":"2.0","id":2}"#, "2"),
        (#"{"jsonrpc":"2.0","id":3,"method":5}"#, "3"),
        (#"{"jsonrpc":"2.0","id":4,"method":"m","params":"s"}"#, "4"),
        (#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, "null"),
        (#"42"#, "null"),
    ])
    func invalidRequestsKeepTheirIDWhenReadable(text: String, expectedID: String) throws {
        let value = try JSONParser.parse(text)
        guard case .invalid(let id, let error) = MessageCodec.decode(value) else {
            Issue.record("expected invalid")
            return
        }
        #expect(error.code == .invalidRequest)
        #expect((id ?? .null).jsonValue.jsonText == expectedID)
    }

    @Test func responsesFromThePeerAreRecognised() throws {
        let value = try JSONParser.parse(#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        guard case .response = MessageCodec.decode(value) else {
            Issue.record("expected response")
            return
        }
    }

    @Test func errorsCarryKindInData() {
        let error = RPCError.invalidParams([ParamDiagnostic(pointer: "/query/b/1", reason: "must be a string")])
        let json = error.jsonValue
        #expect(json["code"] == .int(-32602))
        #expect(json["data"]?["kind"] == "invalid_params")
        #expect(json["data"]?["diagnostics"] == [["pointer": "/query/b/1", "reason": "must be a string"]])
    }

    @Test func pointerComponentsAreEscaped() {
        #expect(ParamDiagnostic.pointer(["a/b", "c~d", "0"]) == "/a~1b/c~0d/0")
    }
}
