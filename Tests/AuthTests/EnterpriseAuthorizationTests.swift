import CCrypto
import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

/// Enterprise-managed authorization (SPEC §9.9): a jwt-bearer session whose assertion is an
/// ID-JAG that a token exchange at the person's IdP issues for their ID token.
@Suite(.timeLimit(.minutes(5)))
struct EnterpriseAuthorizationTests {
    static let issuer = "https://as.example"
    static let resource = "https://mcp.example/mcp"
    static let idToken = "eyJhbGciOiJFUzI1NiJ9.id-token-canary-7f3a.c2ln"
    static let idJAG = "eyJ0eXAiOiJvYXV0aC1pZC1qYWcrand0In0.id-jag-canary-91c2.c2ln"

    /// The IdP's exchange, with no audience or resource of its own.
    static let idp = OAuthClientConfiguration(
        tokenURL: "https://idp.example/token", clientID: "editor", clientAuth: .none,
        grant: .tokenExchange(
            TokenExchange(
                subject: .secret(.value(idToken), description: "subject_token"),
                subjectTokenType: "urn:ietf:params:oauth:token-type:id_token",
                requestedTokenType: "urn:ietf:params:oauth:token-type:id-jag")))

    static let server = OAuthClientConfiguration(
        issuer: issuer, clientID: "app", clientSecret: .value("app-secret-5d1e"), clientAuth: .clientSecretBasic,
        resources: [resource], grant: .jwtBearer(.session(environment: "staging", profile: "idp", configuration: idp)))

    /// The IdP answers `idp` for exchanges, the authorization server its metadata and tokens.
    static func transport(idp: @escaping @Sendable () -> HTTPResponse) -> FakeTransport {
        FakeTransport { request in
            switch (request.method, request.url) {
            case ("POST", "https://idp.example/token"): return .success(idp())
            case ("POST", "https://as.example/token"): return .success(tokenResponse("at-mcp"))
            case ("GET", "https://as.example/.well-known/oauth-authorization-server"):
                return .success(json(#"{"issuer":"https://as.example","token_endpoint":"https://as.example/token"}"#))
            default: return .success(HTTPResponse(status: 404))
            }
        }
    }

    @Test func theIDJAGIsAskedForTheServerAndResourceAndPresentedThere() async throws {
        let transport = Self.transport {
            json(
                #"{"access_token":"\#(Self.idJAG)","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","#
                    + #""token_type":"N_A","expires_in":300}"#)
        }
        let h = try await Harness(configuration: Self.server, transport: transport)
        #expect(try await h.token().accessToken == "at-mcp")

        let posts = transport.tokenRequests
        #expect(posts.map(\.url) == ["https://idp.example/token", "https://as.example/token"])
        let exchange = Harness.form(posts[0])
        #expect(exchange["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange")
        #expect(exchange["subject_token"] == Self.idToken)
        #expect(exchange["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token")
        #expect(exchange["requested_token_type"] == "urn:ietf:params:oauth:token-type:id-jag")
        #expect(exchange["audience"] == Self.issuer)
        #expect(exchange["resource"] == Self.resource)
        #expect(exchange["client_id"] == "editor")
        let grant = Harness.form(posts[1])
        #expect(grant["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        #expect(grant["assertion"] == Self.idJAG)
        #expect(grant["resource"] == Self.resource)
        #expect(posts[1].headers["Authorization"]?.hasPrefix("Basic ") == true)

        // The ID-JAG is held by the IdP's session (keyed by that audience and resource) and used
        // again while it lasts: a renewal of the server's token asks the IdP nothing.
        _ = await h.manager.invalidate(environment: "staging", profile: "service")
        #expect(try await h.token().accessToken == "at-mcp")
        #expect(transport.tokenRequests.filter { $0.url == "https://idp.example/token" }.count == 1)
    }

    /// An ID-JAG of unknown lifetime is held until the server refuses it: then it is asked for
    /// again, once; a server that refuses the fresh one too gets no third.
    @Test func aRefusedIDJAGIsAskedForAgainOnce() async throws {
        let transport = Self.transport {
            json(
                #"{"access_token":"\#(Self.idJAG)","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","#
                    + #""token_type":"N_A"}"#)
        }
        let h = try await Harness(configuration: Self.server, transport: transport)
        _ = try await h.token()
        _ = await h.manager.invalidate(environment: "staging", profile: "service")
        transport.enqueue(
            .success(oauthError("invalid_grant")),
            .success(
                json(
                    #"{"access_token":"jag-2.x.y","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A"}"#
                )),
            .success(tokenResponse("at-mcp-2")))
        #expect(try await h.token().accessToken == "at-mcp-2")
        let grants = transport.tokenRequests.filter { $0.url == "https://as.example/token" }.map {
            Harness.form($0)["assertion"]
        }
        #expect(grants == [Self.idJAG, Self.idJAG, "jag-2.x.y"])

        _ = await h.manager.invalidate(environment: "staging", profile: "service")
        transport.enqueue(
            .success(oauthError("invalid_grant")),
            .success(
                json(
                    #"{"access_token":"jag-3.x.y","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A"}"#
                )),
            .success(oauthError("invalid_grant")))
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(transport.tokenRequests.count == 8)
    }

    /// `subject: { profile, token: id_token }`: the ID token validated at the person's last
    /// renewal (or login) in this process is exchanged; a process that has seen none says so
    /// (`interaction_required`) rather than present anything else.
    @Test func theIDTokenOfAPersonsSessionIsExchangedAndNeverInvented() async throws {
        let signer = try TestSigningKey(.p256, kid: "idp-1")
        let claims = #"{"iss":"https://idp.example","aud":"cli","sub":"alice","exp":1800000300,"iat":1800000000}"#
        let idToken = signer.sign(claims, alg: "ES256")
        let jwks = #"{"keys":[\#(signer.jwk)]}"#
        let route: @Sendable (HTTPRequest) -> Result<HTTPResponse, HTTPError> = { request in
            let form = Harness.form(request)
            switch (request.method, request.url) {
            case ("GET", "https://idp.example/.well-known/oauth-authorization-server"):
                return .success(
                    json(
                        #"{"issuer":"https://idp.example","token_endpoint":"https://idp.example/token","#
                            + #""jwks_uri":"https://idp.example/jwks"}"#))
            case ("GET", "https://idp.example/jwks"): return .success(json(jwks))
            case ("POST", "https://idp.example/token") where form["grant_type"] == "refresh_token":
                return .success(
                    json(
                        #"{"access_token":"person-at","token_type":"Bearer","expires_in":3600,"#
                            + #""refresh_token":"rt-2","id_token":"\#(idToken)"}"#))
            case ("POST", "https://idp.example/token"):
                return .success(
                    json(
                        #"{"access_token":"\#(Self.idJAG)","token_type":"N_A","#
                            + #""issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"}"#))
            case ("POST", "https://as.example/token"): return .success(tokenResponse("at-mcp"))
            case ("GET", "https://as.example/.well-known/oauth-authorization-server"):
                return .success(json(#"{"issuer":"https://as.example","token_endpoint":"https://as.example/token"}"#))
            default: return .success(HTTPResponse(status: 404))
            }
        }
        let transport = FakeTransport(fallback: route)
        let person = OAuthClientConfiguration(
            issuer: "https://idp.example", clientID: "cli", clientAuth: .none, scopes: ["openid"],
            grant: .refreshToken(seed: .value("rt-seed-3c9b")))
        let personKey = SessionKey(environment: "staging", profile: "person", configuration: person)
        let idp = OAuthClientConfiguration(
            tokenURL: "https://idp.example/token", clientID: "cli", clientAuth: .none,
            grant: .tokenExchange(
                TokenExchange(
                    subject: .sessionIDToken(personKey), subjectTokenType: "urn:ietf:params:oauth:token-type:id_token",
                    requestedTokenType: "urn:ietf:params:oauth:token-type:id-jag")))
        var server = Self.server
        server.grant = .jwtBearer(.session(environment: "staging", profile: "idp", configuration: idp))

        let h = try await Harness(configuration: server, transport: transport)
        try await h.manager.register(environment: "staging", profile: "person", configuration: person)
        #expect(try await h.token().accessToken == "at-mcp")
        let exchange = try #require(
            transport.tokenRequests.first { Harness.form($0)["grant_type"]?.hasSuffix("token-exchange") == true })
        #expect(Harness.form(exchange)["subject_token"] == idToken)
        #expect(Harness.form(exchange)["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token")

        // Another process logs another person in: this process's ID token (alice's) is not theirs.
        h.store.put(
            StoredTokens(
                accessToken: "bob-at", receivedAt: h.clock.now, expiresAt: h.clock.now.addingTimeInterval(3600),
                refreshToken: "rt-bob", subject: "bob"), for: personKey)
        _ = try await h.manager.invalidate(personKey, ifAccessToken: "not-held")  // reads the store again
        _ = await h.manager.invalidate(environment: "staging", profile: "service")
        _ = await h.manager.invalidate(environment: "staging", profile: "idp")
        let exchanges = transport.tokenRequests.count
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(transport.tokenRequests.count == exchanges)

        // Another process with the same store holds the person's access token but no ID token.
        let later = FakeTransport(fallback: route)
        let h2 = try await Harness(configuration: server, transport: later, store: h.store)
        try await h2.manager.register(environment: "staging", profile: "person", configuration: person)
        _ = await h2.manager.invalidate(environment: "staging", profile: "service")
        _ = try await h2.manager.assertionSession(server)  // declared as the first grant would
        _ = await h2.manager.invalidate(environment: "staging", profile: "idp")
        do {
            _ = try await h2.token()
            Issue.record("an exchange without the ID token gave a token")
        } catch let error as AuthError {
            #expect(error.errorKind == .interactionRequired, "\(error)")
        }
        #expect(!later.tokenRequests.contains { Harness.form($0)["grant_type"]?.hasSuffix("token-exchange") == true })
    }

    /// The IdP profile itself, used for an API request, sends nothing: an ID-JAG is an assertion.
    @Test func anIDJAGIsNeverSentToAnAPI() async throws {
        let transport = Self.transport {
            json(
                #"{"access_token":"\#(Self.idJAG)","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","#
                    + #""token_type":"N_A"}"#)
        }
        let h = try await Harness(configuration: Self.idp, transport: transport)
        var request = HTTPRequest(method: "GET", url: "https://api.example/x")
        await #expect(throws: AuthError.self) {
            _ = try await TokenCredentialSource(manager: h.manager, key: h.key).apply(to: &request)
        }
        #expect(request.headers["Authorization"] == nil)
    }

    @Test func anIdPRefusalIsTheErrorAndNothingGoesToTheServer() async throws {
        let transport = Self.transport { oauthError("invalid_grant", description: "Invalid ID token") }
        let h = try await Harness(configuration: Self.server, transport: transport)
        do {
            _ = try await h.token()
            Issue.record("a refused exchange gave a token")
        } catch let error as AuthError {
            #expect(error.errorKind == .auth, "\(error)")
            #expect(!error.description.contains("id-token-canary"))
        }
        #expect(transport.tokenRequests.map(\.url) == ["https://idp.example/token"])
    }

    @Test func notApplicableIsAcceptedOnlyForATokenThatIsNotAnAccessToken() throws {
        let idJAG = Array(
            (#"{"access_token":"x.y.z","token_type":"N_A","#
                + #""issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"}"#).utf8)
        #expect(try TokenResponseParser.parseSuccess(idJAG).accessToken == "x.y.z")
        for body in [
            #"{"access_token":"x.y.z","token_type":"N_A"}"#,
            #"{"access_token":"x.y.z","token_type":"N_A","issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}"#,
        ] {
            #expect(throws: AuthError.self) { try TokenResponseParser.parseSuccess(Array(body.utf8)) }
        }
    }
}
