import Testing
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

@testable import TokenRelayServer

/// The MCP face's pure parts: what an agent receives of a response (redacted, cut on a
/// character boundary), the era a request belongs to, and the error codes an MCP client sees.
@Suite struct MCPToolTests {
    static func structured(_ outcome: MCPToolOutcome) -> (isError: Bool, structured: JSONObject?, text: String) {
        guard case .result(let isError, let structured, let text) = outcome else { return (true, nil, "") }
        return (isError, structured, text)
    }

    @Test func secretsAreMaskedInBodyAndHeadersBeforeTheBodyIsCut() {
        let secret = "mcp-unit-canary-4b1d9e"
        Redactor.shared.register(secret)
        let body = Array("{\"echo\":\"Bearer \(secret)\"}".utf8)
        let response = HTTPResponse(
            status: 201, headers: HTTPHeaders([("Content-Type", "application/json"), ("X-Echo", secret)]), body: body)
        let (isError, structured, text) = Self.structured(
            HTTPRequestTool.encode(response, limit: 1000, elapsed: .milliseconds(3)))
        #expect(!isError)
        #expect(structured?["status"] == .int(201))
        #expect(structured?["json"]?["echo"] == .string("Bearer [REDACTED]"))
        #expect(structured?["headers"]?["x-echo"] == .string("[REDACTED]"))
        #expect(structured?["truncated"] == .bool(false))
        #expect(!text.contains(secret))
        #expect(text.hasPrefix("HTTP 201\ncontent-type: application/json"))
    }

    /// Issue 44: the consent question's body preview is masked whole before it is cut at 300
    /// bytes, so a secret across the cut never shows its start.
    @Test func theConsentQuestionMasksTheBodyBeforeItIsCut() throws {
        let secret = "consent-canary-7e2a91c4"
        Redactor.shared.register(secret)
        let body = String(repeating: "x", count: 290) + secret + String(repeating: "y", count: 20)
        let request = try RequestParams.decode(["method": "POST", "path": "/repos/a/issues", "text": .string(body)])
        let summary = HTTPRequestTool.summary(
            method: "POST", url: "https://api.example/repos/a/issues", request: request, scope: "api/key")
        #expect(!summary.contains(secret.prefix(6)), "\(summary)")
        #expect(summary.contains("[REDACTED]"), "\(summary)")
    }

    /// Issue 44: `_method` (and the override headers' names) as a query, JSON or form parameter
    /// would make a call the rules allow act as another method.
    @Test func methodOverrideParametersAreFoundWhereFrameworksReadThem() {
        #expect(HTTPRequestTool.methodOverrideParameter(["query": ["_method": "DELETE"]]) == "_method")
        #expect(HTTPRequestTool.methodOverrideParameter(["query": ["_METHOD": "DELETE"]]) == "_METHOD")
        #expect(HTTPRequestTool.methodOverrideParameter(["json": ["title": "x", "_method": "PUT"]]) == "_method")
        #expect(HTTPRequestTool.methodOverrideParameter(["text": "a=1&%5Fmethod=DELETE"]) == "%5Fmethod")
        #expect(HTTPRequestTool.methodOverrideParameter(["query": ["x-http-method-override": "DELETE"]]) != nil)
        #expect(HTTPRequestTool.methodOverrideParameter(["query": ["method": "x"], "text": "m=_method"]) == nil)
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7])
    func bodiesAreCutOnACharacterBoundary(limit: Int) {
        // "a" then three-byte characters: every limit falls at or inside one.
        let body = Array(("a" + String(repeating: "€", count: 4)).utf8)
        let response = HTTPResponse(
            status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")]), body: body)
        let (_, structured, _) = Self.structured(HTTPRequestTool.encode(response, limit: limit, elapsed: .zero))
        let text = structured?["text"]?.stringValue ?? ""
        #expect(structured?["truncated"] == .bool(true))
        #expect(text.utf8.count <= limit)
        #expect(text == "a" + String(repeating: "€", count: (limit - 1) / 3))
    }

    @Test func theEraFollowsTheRequestsMeta() throws {
        #expect(try MCPProtocol.era(of: nil, negotiated: "2025-06-18") == .handshake(version: "2025-06-18"))
        let stateless: JSONValue = [
            "_meta": [
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": ["elicitation": [:]],
            ]
        ]
        let era = try MCPProtocol.era(of: stateless, negotiated: nil)
        #expect(era.isStateless)
        if case .stateless(_, let capabilities) = era {
            #expect(MCPProtocol.supportsFormElicitation(capabilities))
        }
        #expect(!MCPProtocol.supportsFormElicitation(["elicitation": ["url": [:]]]))
        #expect(!MCPProtocol.supportsFormElicitation([:]))
        let unknown: JSONValue = ["_meta": ["io.modelcontextprotocol/protocolVersion": "2025-11-25"]]
        #expect(throws: RPCError.self) { try MCPProtocol.era(of: unknown, negotiated: nil) }
        do {
            _ = try MCPProtocol.era(of: unknown, negotiated: nil)
        } catch {
            #expect(error.code.rawValue == -32022)
            #expect(MCPProtocol.mapError(error).code.rawValue == -32022)
            #expect(error.data["supported"]?.stringArray == MCPProtocol.supportedVersions)
        }
    }

    @Test func tokenrelayCodesInTheRangeMCPReservesAreRemapped() {
        let limit = RPCError(code: .limit, message: "too many")
        #expect(MCPProtocol.mapError(limit).code.rawValue == -32000)
        #expect(MCPProtocol.mapError(limit).kind == .limit)
        #expect(MCPProtocol.mapError(.cancelled).code == .requestCancelled)
    }

    @Test func exposureFollowsTheBlocks() throws {
        let rules = MCPSettings(allow: [try MCPRule.parse("GET /**").get()])
        var open = EnvironmentSettings(name: "open", baseURL: "https://a.example")
        open.mcp = rules
        open.profiles = [
            ProfileSettings(name: "p", typeName: "bearer", kind: .bearer(token: .inline("tok-12345"), cache: nil))
        ]
        var partial = EnvironmentSettings(name: "partial", baseURL: "https://b.example")
        var exposed = ProfileSettings(
            name: "yes", typeName: "bearer", kind: .bearer(token: .inline("tok-12345"), cache: nil))
        exposed.mcp = rules
        partial.profiles = [
            exposed,
            ProfileSettings(name: "no", typeName: "bearer", kind: .bearer(token: .inline("tok-12345"), cache: nil)),
        ]
        let closed = EnvironmentSettings(name: "closed", baseURL: "https://c.example")
        let settings = Settings(environments: [open, partial, closed])
        let exposure = MCPExposure(settings: settings, defaultEnvironment: "closed")
        #expect(exposure.environments.map(\.name) == ["open", "partial"])
        #expect(exposure.environment(named: "partial")?.profiles.map(\.name) == ["yes"])
        #expect(exposure.environment(named: "partial")?.defaultProfile == "yes")
        #expect(exposure.defaultEnvironment == nil)
        #expect(
            MCPExposure(settings: settings, defaultEnvironment: nil, only: "open").environments.map(\.name) == ["open"])
    }
}
