import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

/// `logout` revokes the session's tokens at the server (RFC 7009) where discovery offers it.
@Suite(.timeLimit(.minutes(5)))
struct RevocationTests {
    static let issuer = "http://127.0.0.1:9000/o"
    static let revocationURL = "http://127.0.0.1:9000/o/revoke_token/"

    /// An AS serving metadata (with a revocation endpoint unless `revocation` is false), tokens
    /// with rotating refresh tokens, and revocation answers from `revocationAnswer`.
    static func server(
        revocation: Bool = true,
        revocationAnswer: @escaping @Sendable () -> Result<HTTPResponse, HTTPError> = {
            .success(HTTPResponse(status: 200))
        }
    ) -> FakeTransport {
        let extra = revocation ? #","revocation_endpoint":"\#(revocationURL)""# : ""
        let metadata = json(#"{"issuer":"\#(issuer)","token_endpoint":"http://127.0.0.1:9000/o/token/"\#(extra)}"#)
        return FakeTransport { request in
            if request.url == revocationURL { return revocationAnswer() }
            if request.method == "POST" { return .success(tokenResponse("at-live", refreshToken: "rt-live")) }
            if request.url == "http://127.0.0.1:9000/.well-known/oauth-authorization-server/o" {
                return .success(metadata)
            }
            return .success(HTTPResponse(status: 404))
        }
    }

    static func configuration(issuer: String? = issuer, clientAuth: ClientAuthMethod = .clientSecretBasic)
        -> OAuthClientConfiguration
    {
        OAuthClientConfiguration(
            issuer: issuer, tokenURL: issuer == nil ? "http://127.0.0.1:9000/o/token/" : nil, clientID: "app",
            clientSecret: .value("app-secret-rev"), clientAuth: clientAuth,
            grant: .refreshToken(seed: .value("rt-seed-rev")))
    }

    @Test(arguments: [ClientAuthMethod.clientSecretBasic, .clientSecretPost, .none])
    func logoutRevokesRefreshThenAccessTokenWithTheClientsAuthentication(_ clientAuth: ClientAuthMethod) async throws {
        let transport = Self.server()
        let h = try await Harness(configuration: Self.configuration(clientAuth: clientAuth), transport: transport)
        _ = try await h.token()
        #expect(try await h.manager.logout() == 1)
        let revocations = transport.requests.filter { $0.url == Self.revocationURL }
        try #require(revocations.count == 2)
        #expect(revocations.allSatisfy { $0.method == "POST" })
        #expect(Harness.form(revocations[0])["token"] == "rt-live")
        #expect(Harness.form(revocations[0])["token_type_hint"] == "refresh_token")
        #expect(Harness.form(revocations[1])["token"] == "at-live")
        #expect(Harness.form(revocations[1])["token_type_hint"] == "access_token")
        for request in revocations {
            let form = Harness.form(request)
            switch clientAuth {
            case .clientSecretBasic:
                #expect(
                    request.headers["Authorization"]
                        == FormBody.basicAuthorization(clientID: "app", secret: "app-secret-rev"))
                #expect(form["client_secret"] == nil)
            case .clientSecretPost:
                #expect(form["client_id"] == "app")
                #expect(form["client_secret"] == "app-secret-rev")
                #expect(request.headers["Authorization"] == nil)
            case .none:
                #expect(form["client_id"] == "app")
                #expect(form["client_secret"] == nil)
                #expect(request.headers["Authorization"] == nil)
            case .privateKeyJWT, .tlsClientAuth, .selfSignedTLSClientAuth:
                Issue.record("private_key_jwt and mutual TLS are covered by their own and the end-to-end tests")
            }
        }
        #expect(h.store.entry(h.key) == nil)
    }

    @Test(arguments: [
        Result<HTTPResponse, HTTPError>.failure(.transport("connection refused")), .success(HTTPResponse(status: 503)),
        .success(oauthError("unsupported_token_type")), .failure(.timeout),
    ])
    func aFailedRevocationStillLogsOutLocally(_ answer: Result<HTTPResponse, HTTPError>) async throws {
        let transport = Self.server(revocationAnswer: { answer })
        let h = try await Harness(configuration: Self.configuration(), transport: transport)
        _ = try await h.token()
        #expect(try await h.manager.logout() == 1)
        #expect(transport.requests.filter { $0.url == Self.revocationURL }.count == 2)
        #expect(h.store.entry(h.key) == nil)
        let status = try #require(await h.manager.status().first)
        #expect(status.refreshable == false)
        #expect(status.lastError == nil)
    }

    @Test func withoutARevocationEndpointNothingIsSent() async throws {
        for configuration in [Self.configuration(), Self.configuration(issuer: nil)] {
            let transport = Self.server(revocation: false)
            let h = try await Harness(configuration: configuration, transport: transport)
            _ = try await h.token()
            let before = transport.requests.count
            #expect(try await h.manager.logout() == 1)
            #expect(transport.requests.count == before)
        }
    }

    @Test func storedTokensOfAnUnloadedSessionAreRevokedToo() async throws {
        let transport = Self.server()
        let store = FakeStore()
        let h = try await Harness(configuration: Self.configuration(), transport: transport, store: store)
        store.put(StoredTokens(accessToken: "at-stored", tokenType: "Bearer", refreshToken: "rt-stored"), for: h.key)
        #expect(try await h.manager.logout() == 1)
        let revoked = transport.requests.filter { $0.url == Self.revocationURL }.map { Harness.form($0)["token"] }
        #expect(revoked == ["rt-stored", "at-stored"])
        #expect(store.entry(h.key) == nil)
    }

    @Test func authErrorExposesItsWireKind() {
        let expected: [(AuthError, ErrorKind)] = [
            (.timeout, .timeout), (.interactionRequired("x"), .interactionRequired), (.transport("x"), .transport),
            (.excessiveRenewals, .auth), (.configuration("x"), .config), (.secretUnavailable("x"), .config),
            (.loggedOut, .loggedOut),
            (.shuttingDown, .shuttingDown), (.cancelled, .cancelled), (.loginAttemptsExceeded, .limit),
        ]
        for (error, kind) in expected {
            let kinded: any KindedError = error
            #expect(kinded.errorKind == kind, "\(error)")
        }
    }
}
