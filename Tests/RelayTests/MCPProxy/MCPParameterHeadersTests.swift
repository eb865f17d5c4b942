import Testing
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `x-mcp-header` declarations (MCP 2026-07-28 Streamable HTTP, "Custom Headers from Tool
/// Parameters"): which are valid, and the headers a call's arguments give.
@Suite struct MCPParameterHeadersTests {
    private func schema(_ text: String) throws -> JSONValue { try JSONParser.parse(text) }

    @Test func annotatedScalarsAlongAPropertiesChainAreMirroredAndEncoded() throws {
        let headers = try MCPParameterHeaders(
            inputSchema: try schema(
                #"""
                {"type":"object","properties":{
                  "region":{"type":"string","x-mcp-header":"Region"},
                  "options":{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"}}},
                  "dry":{"type":"boolean","x-mcp-header":"Dry-Run"},
                  "note":{"type":"string","x-mcp-header":"Note"},
                  "query":{"type":"string"}}}
                """#))
        let arguments = try schema(
            #"{"region":"Zürich","options":{"limit":-7},"dry":false,"note":null,"query":"select 1"}"#)
        let mirrored = headers.headers(for: arguments)
        #expect(mirrored.map(\.name) == ["Mcp-Param-Region", "Mcp-Param-Limit", "Mcp-Param-Dry-Run"])
        #expect(mirrored.map(\.value) == ["=?base64?WsO8cmljaA==?=", "-7", "false"])
        // Absent values send no header; a value past JavaScript's safe integers is not mirrored.
        #expect(headers.headers(for: try schema(#"{"options":{"limit":9007199254740993}}"#)).isEmpty)
        #expect(headers.headers(for: try schema(#"{"options":{"limit":-9223372036854775808}}"#)).isEmpty)
        #expect(headers.headers(for: nil).isEmpty)
    }

    @Test(arguments: [
        // Under items, a composition keyword, or at the root: not statically reachable.
        #"{"type":"object","properties":{"ids":{"type":"array","items":{"type":"string","x-mcp-header":"Id"}}}}"#,
        #"{"type":"object","properties":{"a":{"oneOf":[{"type":"string","x-mcp-header":"A"}]}}}"#,
        #"{"type":"object","x-mcp-header":"Root"}"#,
        #"{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}}}"#,
        // Not a token, a number, no type, used twice.
        #"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Bad Name"}}}"#,
        #"{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
        #"{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}"#,
        #"{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}"#,
    ])
    func invalidDeclarationsExcludeTheTool(_ text: String) throws {
        #expect(throws: MCPParameterHeaders.Invalid.self) { try MCPParameterHeaders(inputSchema: try schema(text)) }
    }
}
