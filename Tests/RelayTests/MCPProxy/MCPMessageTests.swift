import Testing
import TokenRelayHTTP
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// The request metadata headers mirrored from a client message (Streamable HTTP, 2026-07-28).
@Suite struct MCPMessageTests {
    private func message(_ text: String) throws -> MCPMessage {
        try #require(MCPMessage(Array(text.utf8)))
    }

    @Test func aToolCallCarriesMethodNameAndNegotiatedVersion() throws {
        let call = try message(#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#)
        let headers = call.headers(sessionID: "s-1", negotiated: "2025-11-25")
        #expect(headers["Mcp-Method"] == "tools/call")
        #expect(headers["Mcp-Name"] == "echo")
        #expect(headers["MCP-Protocol-Version"] == "2025-11-25")
        #expect(headers["Mcp-Session-Id"] == "s-1")
        #expect(headers["Accept"] == "application/json, text/event-stream")
        #expect(call.isRequest)
    }

    @Test func theMessagesOwnVersionWinsAndResourcesAreNamedByURI() throws {
        let read = try message(
            #"{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"file:///x","#
                + #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#)
        let headers = read.headers(sessionID: nil, negotiated: "2025-11-25")
        #expect(headers["MCP-Protocol-Version"] == "2026-07-28")
        #expect(headers["Mcp-Name"] == "file:///x")
        #expect(!headers.contains("Mcp-Session-Id"))
    }

    @Test func notificationsAndResponsesCarryNoMethodHeader() throws {
        let notification = try message(#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        #expect(!notification.isRequest)
        #expect(!notification.headers(sessionID: nil, negotiated: nil).contains("Mcp-Method"))
        let response = try message(#"{"jsonrpc":"2.0","id":3,"result":{}}"#)
        #expect(!response.isRequest)
    }

    @Test(arguments: [
        ("get_weather", "get_weather"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ])
    func headerValuesUseTheBase64SentinelWhenUnsafe(value: String, expected: String) {
        #expect(MCPMessage.headerValue(value) == expected)
    }

    @Test func somethingElseThanAJSONRPCObjectIsRefused() {
        #expect(MCPMessage(Array("[1,2]".utf8)) == nil)
        #expect(MCPMessage(Array("not json".utf8)) == nil)
    }

    @Test func theErrorAnswerKeepsTheRequestIDAndSaysItsKind() throws {
        let answer = MCPMessage.errorAnswer(id: .string("x"), error: RPCError(kind: .httpStatus, message: "m"))
        let value = try JSONParser.parse(answer)
        #expect(value["id"] == .string("x"))
        // -32020 (tokenrelay's http_status) is HeaderMismatch to a 2026-07-28 client: mapped as
        // the MCP face maps its own codes, the kind in data.
        #expect(ErrorCode(kind: .httpStatus).rawValue == -32020)
        #expect(value["error"]?["code"] == .int(-32000))
        #expect(value["error"]?["data"]?["kind"] == .string("http_status"))
    }
}
