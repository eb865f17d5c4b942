import FoundationEssentials
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// Discovery from the resource (SPEC §9.1), resource identifiers (§9.3), registration (§9.4).
@Suite struct ResourceDiscoveryTests {
    static let resource = "http://127.0.0.1:9100/mcp"
    static let issuer = "http://127.0.0.1:9200"

    static func prm(resource: String = resource, servers: [String] = [issuer]) -> HTTPResponse {
        let list = servers.map { "\"\($0)\"" }.joined(separator: ",")
        return json(#"{"resource":"\#(resource)","authorization_servers":[\#(list)],"scopes_supported":["mcp"]}"#)
    }

    static func asMetadata(issuer: String = issuer) -> HTTPResponse {
        json(
            #"{"issuer":"\#(issuer)","token_endpoint":"\#(Self.issuer)/token","authorization_endpoint":"\#(Self.issuer)/authorize","#
                + #""registration_endpoint":"\#(Self.issuer)/register","code_challenge_methods_supported":["S256"],"#
                + #""scopes_supported":["mcp","offline_access"]}"#)
    }

    /// A resource server and authorization server on one fake transport.
    static func server(prm: HTTPResponse = prm(), metadata: HTTPResponse = asMetadata()) -> FakeTransport {
        FakeTransport { request in
            switch request.url {
            case "http://127.0.0.1:9100/.well-known/oauth-protected-resource/mcp": .success(prm)
            case "http://127.0.0.1:9200/.well-known/oauth-authorization-server": .success(metadata)
            case "http://127.0.0.1:9200/register":
                .success(json(#"{"client_id":"registered-1"}"#, status: 201))
            default: .success(HTTPResponse(status: 404))
            }
        }
    }

    static func resolver(
        _ transport: FakeTransport, store: any TokenStore = InMemoryTokenStore(), clientID: String? = nil
    )
        -> ResourceAuthorization
    {
        let manager = TokenManager(transport: transport, store: store)
        let template = DiscoveryTemplate(
            resourceURL: resource, clientID: clientID,
            grant: .interactive(InteractiveLogin(flow: .authorizationCode(ports: [0], path: "/callback"))))
        return ResourceAuthorization(
            manager: manager, transport: transport, environment: "e", profile: "p", template: template)
    }

    @Test(arguments: [
        ("HTTPS://Example.COM/mcp/", "https://example.com/mcp"),
        ("https://example.com", "https://example.com"),
        ("https://example.com/", "https://example.com"),
        ("https://example.com/a#frag", "https://example.com/a"),
        ("https://example.com:8443/a/B", "https://example.com:8443/a/B"),
    ])
    func canonicalResourceURIs(input: String, expected: String) {
        #expect(ResourceIdentifier.canonical(input) == expected)
    }

    @Test func canonicalRefusesOtherSchemesAndUserInfo() {
        #expect(ResourceIdentifier.canonical("ftp://example.com") == nil)
        #expect(ResourceIdentifier.canonical("https://user@example.com/") == nil)
        #expect(ResourceIdentifier.canonical("example.com") == nil)
    }

    @Test func wellKnownURLsArePathAwareThenRoot() throws {
        #expect(
            try ProtectedResourceMetadata.wellKnownURLs(for: "https://h.example/a/mcp") == [
                "https://h.example/.well-known/oauth-protected-resource/a/mcp",
                "https://h.example/.well-known/oauth-protected-resource",
            ])
        #expect(
            try ProtectedResourceMetadata.wellKnownURLs(for: "https://h.example/") == [
                "https://h.example/.well-known/oauth-protected-resource"
            ])
        #expect(throws: AuthError.self) { try ProtectedResourceMetadata.wellKnownURLs(for: "http://h.example/mcp") }
    }

    @Test func metadataLifetimeFollowsCacheControlAtMostAnHour() {
        #expect(ResourceAuthorization.lifetime(cacheControl: nil) == 3600)
        #expect(ResourceAuthorization.lifetime(cacheControl: "public, max-age=60") == 60)
        #expect(ResourceAuthorization.lifetime(cacheControl: "max-age=86400") == 3600)
        #expect(ResourceAuthorization.lifetime(cacheControl: "no-store") == 0)
    }

    @Test func stablePortsDependOnlyOnTheIssuer() {
        let ports = ResourceAuthorization.stablePorts(issuer: Self.issuer)
        #expect(ports == ResourceAuthorization.stablePorts(issuer: Self.issuer))
        #expect(ports.count == 3 && ports.allSatisfy { (49_152..<65_536).contains($0) })
    }

    @Test func discoveryRegistersAndBindsTheResource() async throws {
        let transport = Self.server()
        let store = InMemoryTokenStore()
        let key = try await Self.resolver(transport, store: store).key()
        #expect(key.issuer == Self.issuer)
        #expect(key.clientID == "registered-1")
        #expect(key.resources == [Self.resource])
        #expect(key.scopes == ["mcp", "offline_access"])
        #expect(try await store.loadRegistration(issuer: Self.issuer)?.clientID == "registered-1")
        // A second resolver (another process sharing the store) registers no more.
        _ = try await Self.resolver(transport, store: store).key()
        #expect(transport.requests.filter { $0.url.hasSuffix("/register") }.count == 1)
    }

    @Test func aConfiguredClientKeepsItsPortsAndRegistersNothing() async throws {
        let transport = Self.server()
        let resolver = Self.resolver(transport, clientID: "pre-registered")
        let key = try await resolver.key()
        #expect(key.clientID == "pre-registered")
        #expect(!transport.requests.contains { $0.url.hasSuffix("/register") })
        let configuration = await resolver.manager.configuration(of: key)
        #expect(configuration?.grant.interactive?.flow == .authorizationCode(ports: [0], path: "/callback"))
    }

    /// A discovered jwt-bearer profile (an ID-JAG's server, SPEC §9.9) may name no client (RFC 7523
    /// §3.1): it registers nothing and its session names none.
    @Test func aDiscoveredJWTBearerProfileWithoutAClientRegistersNothing() async throws {
        let transport = Self.server()
        let manager = TokenManager(transport: transport)
        let template = DiscoveryTemplate(
            resourceURL: Self.resource, grant: .jwtBearer(.secret(.value("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"))))
        let resolver = ResourceAuthorization(
            manager: manager, transport: transport, environment: "e", profile: "p", template: template)
        let key = try await resolver.key()
        #expect(key.issuer == Self.issuer && key.clientID == "" && key.resources == [Self.resource])
        #expect(!transport.requests.contains { $0.url.hasSuffix("/register") })
    }

    /// Past the step-up limit (SPEC §9.2) the error says what happened: the resource server
    /// refused the token for lack of scope, after how many step-ups, asking for which scope;
    /// kind `limit`. The token endpoint was not asked, and the error does not say it was.
    @Test func pastTheStepUpLimitTheErrorNamesTheResourceAndTheScope() async throws {
        let transport = Self.server()
        let resolver = Self.resolver(transport)
        _ = try await resolver.key()
        _ = try await resolver.stepUp(scopes: ["a"])
        _ = try await resolver.stepUp(scopes: ["b"])
        let error = await #expect(throws: AuthError.self) { try await resolver.stepUp(scopes: ["c", "d\u{1b}[2J"]) }
        let text = error?.description ?? ""
        #expect(error?.errorKind == .limit)
        #expect(text.contains("the resource server refused the token for lack of scope (HTTP 403 insufficient_scope"))
        #expect(text.contains("asking for scope 'c d [2J'"), "the challenge's scope, cleaned: \(text)")
        #expect(text.contains("after 2 step-ups"), "\(text)")
        #expect(!text.contains("token endpoint"), "\(text)")
        #expect(!transport.requests.contains { $0.url.hasSuffix("/token") })
    }

    /// A token that already has the scopes the resource asks for is not stepped up; kind `auth`.
    @Test func aStepUpForScopesTheTokenHasSaysSo() async throws {
        let resolver = Self.resolver(Self.server())
        _ = try await resolver.key()
        let error = await #expect(throws: AuthError.self) { try await resolver.stepUp(scopes: ["mcp"]) }
        #expect(error?.errorKind == .auth)
        #expect(error?.description.contains("already has those scopes") == true, "\(String(describing: error))")
        #expect(error?.description.contains("token endpoint") == false)
    }

    @Test func aResourceMismatchStopsBeforeTheAuthorizationServer() async {
        let transport = Self.server(prm: Self.prm(resource: "http://127.0.0.1:9100/other"))
        await #expect(throws: AuthError.self) { try await Self.resolver(transport).key() }
        #expect(!transport.requests.contains { $0.url.hasPrefix(Self.issuer) })
    }

    @Test func anIssuerMismatchStopsBeforeRegistration() async {
        let transport = Self.server(metadata: Self.asMetadata(issuer: "http://127.0.0.1:9200/evil"))
        await #expect(throws: AuthError.self) { try await Self.resolver(transport).key() }
        #expect(!transport.requests.contains { $0.url.hasSuffix("/register") || $0.url.hasSuffix("/token") })
    }

    @Test func aNonLoopbackHTTPAuthorizationServerIsRefused() async {
        let transport = Self.server(prm: Self.prm(servers: ["http://as.example"]))
        await #expect(throws: AuthError.self) { try await Self.resolver(transport).key() }
        #expect(!transport.requests.contains { $0.url.hasPrefix("http://as.example") })
    }

    @Test func registrationRecordRoundTripsAndExpires() throws {
        let now = Date(timeIntervalSince1970: 1_000_000)
        let record = ClientRegistration(
            issuer: Self.issuer, clientID: "c", clientSecret: "s3cret-canary", expiresAt: now.addingTimeInterval(30),
            redirectURIs: ["http://127.0.0.1:5000/callback"], tokenEndpointAuthMethod: "client_secret_post")
        #expect(ClientRegistration(json: record.json) == record)
        #expect(!record.description.contains("s3cret-canary"))
        #expect(!record.isUsable(at: now, redirectURIs: ["http://127.0.0.1:5000/callback"]))
        var lasting = record
        lasting.expiresAt = nil
        #expect(lasting.isUsable(at: now, redirectURIs: ["http://127.0.0.1:5000/callback"]))
        #expect(!lasting.isUsable(at: now, redirectURIs: ["http://127.0.0.1:5001/callback"]))
    }

    @Test func registrationAsksForNoneUnlessTheServerRequiresASecret() {
        #expect(DynamicClientRegistration.authMethod(supported: nil) == "none")
        #expect(DynamicClientRegistration.authMethod(supported: ["none", "client_secret_basic"]) == "none")
        #expect(DynamicClientRegistration.authMethod(supported: ["client_secret_post"]) == "client_secret_post")
    }

    /// RFC 8707 §2.2: the code exchange and the device poll carry `resource` as well (they did not).
    /// (The code and device code are registered with the process-wide redactor: unique values, so
    /// that no other suite's text is masked.)
    @Test func everyTokenRequestCarriesTheResource() {
        let configuration = OAuthClientConfiguration(
            issuer: Self.issuer, clientID: "c", clientAuth: .none, resources: [Self.resource],
            grant: .interactive(InteractiveLogin(flow: .authorizationCode(ports: [0], path: "/cb"))))
        let exchange = GrantRequest.authorizationCode(
            "code-unit-7f3a9c", redirectURI: "http://127.0.0.1:1/cb", verifier: "verifier-unit-51ad", configuration)
        #expect(exchange.form.fields.filter { $0.name == "resource" }.map(\.value) == [Self.resource])
        let poll = GrantRequest.deviceCode("device-unit-2b81e4", configuration)
        #expect(poll.form.fields.filter { $0.name == "resource" }.map(\.value) == [Self.resource])
    }
}
