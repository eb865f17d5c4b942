import Testing

@testable import TokenRelayHTTP

@Suite struct MiddlewareTests {
    static let policy = OriginPolicy(baseURL: "https://api.example.com/v1", allowed: ["https://files.example.com:8443"])

    @Test func firstMiddlewareIsOutermost() async throws {
        let transport = FakeTransport()
        let client = HTTPClient(
            transport: transport, middlewares: [TagMiddleware(name: "a"), TagMiddleware(name: "b")])
        let response = try await client.send(collecting: HTTPRequest(url: "https://api.example.com/"))
        #expect(transport.requests.first?.headers.values(for: "X-Order") == ["a", "b"])
        #expect(response.headers.values(for: "X-Trace") == ["b", "a"])
    }

    @Test func environmentHeadersGoOnlyToAllowedOriginsAndRequestHeadersWin() async throws {
        let transport = FakeTransport()
        let environment = HTTPHeaders([
            ("X-Tenant", "acme"), ("Accept", "application/json"), ("X-Multi", "1"), ("X-Multi", "2"),
        ])
        let client = HTTPClient(
            transport: transport,
            middlewares: [EnvironmentHeadersMiddleware(headers: environment, origins: Self.policy)])
        _ = try await client.send(
            collecting:
                HTTPRequest(url: "https://API.example.com:443/items", headers: HTTPHeaders([("accept", "text/csv")])))
        _ = try await client.send(collecting: HTTPRequest(url: "https://files.example.com:8443/f"))
        _ = try await client.send(collecting: HTTPRequest(url: "https://evil.example.net/items"))
        _ = try await client.send(collecting: HTTPRequest(url: "http://api.example.com/items"))
        let sent = transport.requests
        #expect(sent[0].headers.fields.map(\.name) == ["accept", "X-Tenant", "X-Multi", "X-Multi"])
        #expect(sent[0].headers.values(for: "Accept") == ["text/csv"])
        #expect(sent[1].headers["X-Tenant"] == "acme")
        #expect(sent[2].headers.fields.isEmpty)
        #expect(sent[3].headers.fields.isEmpty)
    }
}
