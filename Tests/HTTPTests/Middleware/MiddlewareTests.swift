import Testing

@testable import HTTP

@Suite struct MiddlewareTests {
    static let policy = OriginPolicy(baseURL: "https://api.example.com/v1", allowed: ["https://files.example.com:8443"])
    static let invalidToken = HTTPResponse(
        status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Bearer realm="api", error="invalid_token""#)]))

    @Test func firstMiddlewareIsOutermost() async throws {
        let transport = FakeTransport()
        let client = HTTPClient(
            transport: transport, middlewares: [TagMiddleware(name: "a"), TagMiddleware(name: "b")])
        let response = try await client.send(HTTPRequest(url: "https://api.example.com/"))
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
            HTTPRequest(url: "https://API.example.com:443/items", headers: HTTPHeaders([("accept", "text/csv")])))
        _ = try await client.send(HTTPRequest(url: "https://files.example.com:8443/f"))
        _ = try await client.send(HTTPRequest(url: "https://evil.example.net/items"))
        _ = try await client.send(HTTPRequest(url: "http://api.example.com/items"))
        let sent = transport.requests
        #expect(sent[0].headers.fields.map(\.name) == ["accept", "X-Tenant", "X-Multi", "X-Multi"])
        #expect(sent[0].headers.values(for: "Accept") == ["text/csv"])
        #expect(sent[1].headers["X-Tenant"] == "acme")
        #expect(sent[2].headers.fields.isEmpty)
        #expect(sent[3].headers.fields.isEmpty)
    }

    @Test func credentialsAreWithheldFromOtherOrigins() async throws {
        let transport = FakeTransport()
        let client = HTTPClient(
            transport: transport,
            middlewares: [CredentialsMiddleware(source: FakeCredentialSource(), origins: Self.policy)])
        _ = try await client.send(HTTPRequest(url: "https://api.example.com/v1/items"))
        _ = try await client.send(HTTPRequest(url: "https://api.example.com:444/v1/items"))
        #expect(transport.requests[0].headers["Authorization"] == "Bearer token-1")
        #expect(transport.requests[1].headers["Authorization"] == nil)
    }

    @Test(arguments: ["GET", "HEAD", "OPTIONS"])
    func invalidTokenOnASafeBodylessRequestIsReplayedOnceWithANewToken(method: String) async throws {
        let transport = FakeTransport([Self.invalidToken, HTTPResponse(status: 200)])
        let source = FakeCredentialSource()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(HTTPRequest(method: method, url: "https://api.example.com/v1/items"))
        #expect(response.status == 200)
        #expect(transport.requests.map { $0.headers["Authorization"] } == ["Bearer token-1", "Bearer token-2"])
        #expect(source.invalidated == [CredentialStamp(1)])
    }

    @Test func aSecond401IsReturnedAsItIs() async throws {
        let transport = FakeTransport([Self.invalidToken])
        let source = FakeCredentialSource()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(HTTPRequest(url: "https://api.example.com/v1/items"))
        #expect(response.status == 401)
        #expect(transport.requests.count == 2)
        #expect(source.invalidated.count == 1)
    }

    static let notRecovered: [(String, HTTPRequest, HTTPResponse)] = [
        ("POST", HTTPRequest(method: "POST", url: "https://api.example.com/v1/items"), invalidToken),
        ("GET with body", HTTPRequest(url: "https://api.example.com/v1/items", body: [1]), invalidToken),
        (
            "403", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(status: 403, headers: invalidToken.headers)
        ),
        (
            "insufficient_scope", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(
                status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Bearer error="insufficient_scope""#)]))
        ),
        (
            "Basic", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(
                status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Basic realm="x", error="invalid_token""#)]))
        ),
        ("no challenge", HTTPRequest(url: "https://api.example.com/v1/items"), HTTPResponse(status: 401)),
    ]

    @Test(arguments: notRecovered)
    func otherFailuresAreNeverReplayed(label: String, request: HTTPRequest, answer: HTTPResponse) async throws {
        let transport = FakeTransport([answer])
        let source = FakeCredentialSource()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(request)
        #expect(response.status == answer.status, "\(label)")
        #expect(transport.requests.count == 1, "\(label)")
        #expect(source.invalidated.isEmpty, "\(label)")
    }

    @Test func staticCredentialsAreNeverRenewed() async throws {
        let transport = FakeTransport([Self.invalidToken])
        let source = FakeCredentialSource(renewable: false)
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        #expect(try await client.send(HTTPRequest(url: "https://api.example.com/v1")).status == 401)
        #expect(transport.requests.count == 1)
        #expect(source.invalidated.isEmpty)
    }

    @Test func challengeInASecondFieldOrAfterAnotherSchemeIsFound() {
        let request = HTTPRequest(url: "https://api.example.com/v1")
        let twoFields = HTTPResponse(
            status: 401,
            headers: HTTPHeaders([
                ("WWW-Authenticate", "Basic realm=x"), ("www-authenticate", "bearer ERROR=invalid_token"),
            ]))
        let oneField = HTTPResponse(
            status: 401,
            headers: HTTPHeaders([("WWW-Authenticate", #"Newauth realm="apps", type=1, Bearer error="invalid_token""#)])
        )
        #expect(CredentialsMiddleware.isRecoverable(request: request, response: twoFields))
        #expect(CredentialsMiddleware.isRecoverable(request: request, response: oneField))
    }
}
