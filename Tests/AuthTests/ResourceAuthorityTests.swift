import FoundationEssentials
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// What discovery takes as given (SPEC §9.1, §9.4): the registration answer, the root metadata
/// document's `resource`, the challenge's metadata URL, the keys the profile sets.
@Suite struct ResourceAuthorityTests {
    typealias Base = ResourceDiscoveryTests

    /// A resource and an authorization server listing `methods`, whose registration answers `answer`.
    static func server(methods: [String]?, answer: String) -> FakeTransport {
        let listed =
            methods.map {
                #","token_endpoint_auth_methods_supported":["# + $0.map { "\"\($0)\"" }.joined(separator: ",") + "]"
            } ?? ""
        let metadata = json(
            #"{"issuer":"\#(Base.issuer)","token_endpoint":"\#(Base.issuer)/token","#
                + #""authorization_endpoint":"\#(Base.issuer)/authorize","registration_endpoint":"\#(Base.issuer)/register","#
                + #""code_challenge_methods_supported":["S256"]\#(listed)}"#)
        return FakeTransport { request in
            switch request.url {
            case "http://127.0.0.1:9100/.well-known/oauth-protected-resource/mcp": .success(Base.prm())
            case "http://127.0.0.1:9200/.well-known/oauth-authorization-server": .success(metadata)
            case "http://127.0.0.1:9200/register": .success(json(answer, status: 201))
            default: .success(HTTPResponse(status: 404))
            }
        }
    }

    /// The registration answer is authoritative (SPEC §9.4): a secret without a method takes the
    /// first of basic/post the server lists, else `none` (kept, not sent); a named method is used
    /// as named, even one the server's list leaves out; a configured client_auth does not apply.
    /// Before: a secret always meant client_secret_basic (unless post was named), and the token
    /// request then failed with "client_auth client_secret_basic is not supported by the issuer".
    @Test(arguments: [
        (["none"], #"{"client_id":"c1","client_secret":"s-unit-1"}"#, ClientAuthMethod.none, true),
        (["client_secret_post", "none"], #"{"client_id":"c1","client_secret":"s-unit-1"}"#, .clientSecretPost, true),
        (nil, #"{"client_id":"c1","client_secret":"s-unit-1"}"#, ClientAuthMethod.none, true),
        (
            ["none"],
            #"{"client_id":"c1","client_secret":"s-unit-1","token_endpoint_auth_method":"client_secret_basic"}"#,
            .clientSecretBasic, true
        ),
        (["client_secret_basic"], #"{"client_id":"c1"}"#, ClientAuthMethod.none, false),
    ])
    func theRegistrationAnswerIsAuthoritative(
        methods: [String]?, answer: String, expected: ClientAuthMethod, keepsSecret: Bool
    ) async throws {
        let transport = Self.server(methods: methods, answer: answer)
        let manager = TokenManager(transport: transport, store: InMemoryTokenStore())
        let template = DiscoveryTemplate(
            resourceURL: Base.resource, clientAuth: .privateKeyJWT,
            grant: .interactive(InteractiveLogin(flow: .authorizationCode(ports: [0], path: "/callback"))))
        let resolver = ResourceAuthorization(
            manager: manager, transport: transport, environment: "e", profile: "p", template: template)
        let key = try await resolver.key()
        #expect(key.clientID == "c1")
        let configuration = try #require(await manager.configuration(of: key))
        #expect(configuration.clientAuth == expected)
        #expect((configuration.clientSecret != nil) == keepsSecret)
        #expect(configuration.clientKey == nil)
        // Never refused afterwards: the token endpoint is found for that method.
        let endpoint = try await manager.tokenEndpoint(
            for: configuration, discovery: manager.discoveryClient(environment: "e"),
            deadline: Date().addingTimeInterval(30))
        #expect(endpoint == "\(Base.issuer)/token")
    }

    /// The root well-known document names the origin (RFC 9728 §3.3): accepted, and the origin
    /// is the `resource` sent. Before: refused as "another resource than the one requested".
    @Test(arguments: ["http://127.0.0.1:9100", "http://127.0.0.1:9100/"])
    func theRootDocumentMayNameTheOrigin(named: String) async throws {
        let transport = FakeTransport { request in
            switch request.url {
            case "http://127.0.0.1:9100/.well-known/oauth-protected-resource": .success(Base.prm(resource: named))
            case "http://127.0.0.1:9200/.well-known/oauth-authorization-server": .success(Base.asMetadata())
            default: .success(HTTPResponse(status: 404))
            }
        }
        let key = try await Base.resolver(transport, clientID: "configured").key()
        #expect(key.resources == ["http://127.0.0.1:9100"])
    }

    /// Only the root document, and only a prefix at a segment boundary.
    @Test func aPrefixIsTakenOnlyFromTheRootAtASegmentBoundary() async {
        #expect(ResourceIdentifier.isPrefix("https://h/a", of: "https://h/a/b"))
        #expect(ResourceIdentifier.isPrefix("https://h", of: "https://h/a"))
        #expect(!ResourceIdentifier.isPrefix("https://h/a", of: "https://h/ab"))
        #expect(!ResourceIdentifier.isPrefix("https://h", of: "https://h.evil/a"))
        #expect(!ResourceIdentifier.isPrefix("https://h/a?x=1", of: "https://h/a?x=1/b"))
        // The path-aware document must name the resource itself.
        let transport = Base.server(prm: Base.prm(resource: "http://127.0.0.1:9100"))
        await #expect(throws: AuthError.self) { try await Base.resolver(transport, clientID: "c").key() }
    }

    /// Metadata only at the URL a 401 named (SPEC §9.1): found there, with no well-known URL asked.
    @Test func metadataOnlyAtTheChallengesURLIsFound() async throws {
        let transport = FakeTransport { request in
            switch request.url {
            case "http://127.0.0.1:9100/custom/location.json": .success(Base.prm())
            case "http://127.0.0.1:9200/.well-known/oauth-authorization-server": .success(Base.asMetadata())
            default: .success(HTTPResponse(status: 404))
            }
        }
        let resolver = Base.resolver(transport, clientID: "configured")
        let key = try await resolver.key(metadataHint: "http://127.0.0.1:9100/custom/location.json")
        #expect(key.issuer == Base.issuer)
        #expect(key.resources == [Base.resource])
        #expect(!transport.requests.contains { $0.url.contains("/.well-known/oauth-protected-resource") })
    }

    /// A discovered profile keeps every other key it sets (SPEC §9.4): a configured
    /// `private_key_jwt` client keeps its key. Before: the template had no place for it, and the
    /// session failed with "private_key_jwt needs a client_key".
    @Test func aDiscoveredProfileKeepsItsClientKey() async throws {
        let transport = Base.server()
        let manager = TokenManager(transport: transport, store: InMemoryTokenStore())
        let clientKey = ClientKey(key: .value("unit-test-key"), algorithm: "ES256", keyID: "k1")
        let template = DiscoveryTemplate(
            resourceURL: Base.resource,
            configuration: OAuthClientConfiguration(
                clientID: "svc", clientAuth: .privateKeyJWT, clientKey: clientKey, grant: .clientCredentials))
        let resolver = ResourceAuthorization(
            manager: manager, transport: transport, environment: "e", profile: "p", template: template)
        let key = try await resolver.key()
        let configuration = try #require(await manager.configuration(of: key))
        #expect(configuration.clientAuth == .privateKeyJWT)
        #expect(configuration.clientKey?.keyID == "k1")
        #expect(configuration.issuer == Base.issuer)
        #expect(configuration.resources == [Base.resource])
        #expect(!transport.requests.contains { $0.url.hasSuffix("/register") })
    }

    /// An MCP 2025-03-26 server without resource metadata whose origin has RFC 8414 metadata
    /// naming another issuer (SPEC §9.7): that issuer is used, its metadata is fetched again at the
    /// origin (not at the issuer's own well-known URL), and the origin is the resource. Before:
    /// "no protected resource metadata found".
    @Test func anOlderServersOriginMetadataIsTakenWithTheIssuerItNames() async throws {
        let issuer = "http://127.0.0.1:9100/oauth"
        let transport = FakeTransport { request in
            switch request.url {
            case "http://127.0.0.1:9100/.well-known/oauth-authorization-server":
                .success(
                    json(
                        #"{"issuer":"\#(issuer)","token_endpoint":"\#(issuer)/token","#
                            + #""authorization_endpoint":"\#(issuer)/authorize","registration_endpoint":"\#(issuer)/register","#
                            + #""code_challenge_methods_supported":["S256"]}"#))
            case "\(issuer)/register": .success(json(#"{"client_id":"legacy-1"}"#, status: 201))
            default: .success(HTTPResponse(status: 404))
            }
        }
        let resolver = Base.resolver(transport)
        let key = try await resolver.key()
        #expect(key.issuer == issuer)
        #expect(key.clientID == "legacy-1")
        #expect(key.resources == ["http://127.0.0.1:9100"])
        let manager = await resolver.manager
        let configuration = try #require(await manager.configuration(of: key))
        let discovery = manager.discoveryClient(environment: "e")
        await discovery.clear()
        let endpoint = try await manager.tokenEndpoint(
            for: configuration, discovery: discovery, deadline: Date().addingTimeInterval(30))
        #expect(endpoint == "\(issuer)/token")
        #expect(!transport.requests.contains { $0.url.hasSuffix("/.well-known/oauth-authorization-server/oauth") })
    }

    /// An older server whose origin has no metadata either: the default endpoints there.
    @Test func anOlderServerWithoutMetadataUsesTheDefaultEndpoints() async throws {
        let transport = FakeTransport { request in
            request.url == "http://127.0.0.1:9100/register"
                ? .success(json(#"{"client_id":"fallback-1","client_secret":"s-unit-2"}"#, status: 201))
                : .success(HTTPResponse(status: 404))
        }
        let resolver = Base.resolver(transport)
        let key = try await resolver.key()
        #expect(key.issuer == "http://127.0.0.1:9100")
        #expect(key.clientID == "fallback-1")
        let manager = await resolver.manager
        let configuration = try #require(await manager.configuration(of: key))
        #expect(configuration.clientAuth == ClientAuthMethod.none)
        let discovery = manager.discoveryClient(environment: "e")
        let metadata = try await discovery.metadata(
            for: "http://127.0.0.1:9100", deadline: Date().addingTimeInterval(30))
        #expect(metadata.authorizationEndpoint == "http://127.0.0.1:9100/authorize")
        #expect(metadata.tokenEndpoint == "http://127.0.0.1:9100/token")
    }

    /// A server error at a well-known URL is not taken as "an older server": discovery fails.
    @Test func aServerErrorIsNotAnOlderServer() async {
        let transport = FakeTransport { _ in .success(HTTPResponse(status: 500)) }
        await #expect(throws: AuthError.self) { try await Base.resolver(transport).key() }
        #expect(!transport.requests.contains { $0.url.hasSuffix("/register") })
    }
}
