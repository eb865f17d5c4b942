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
