import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

@Suite(.timeLimit(.minutes(5)))
struct DiscoveryTests {
    static let issuer = "http://127.0.0.1:9000/o"

    static func metadata(issuer: String = issuer, token: String = "http://127.0.0.1:9000/o/token/", extra: String = "")
        -> HTTPResponse
    {
        json(#"{"issuer":"\#(issuer)","token_endpoint":"\#(token)"\#(extra)}"#)
    }

    /// A transport serving metadata at the RFC 8414 URL and tokens at POSTs.
    static func server(_ metadata: HTTPResponse, rfc8414: Bool = true) -> FakeTransport {
        FakeTransport { request in
            if request.method == "POST" { return .success(tokenResponse()) }
            if rfc8414 && request.url == "http://127.0.0.1:9000/.well-known/oauth-authorization-server/o" {
                return .success(metadata)
            }
            if !rfc8414 && request.url == "http://127.0.0.1:9000/o/.well-known/openid-configuration" {
                return .success(metadata)
            }
            return .success(HTTPResponse(status: 404))
        }
    }

    func configuration(tokenURL: String? = nil, clientAuth: ClientAuthMethod = .clientSecretBasic)
        -> OAuthClientConfiguration
    {
        OAuthClientConfiguration(
            issuer: Self.issuer, tokenURL: tokenURL, clientID: "svc", clientSecret: .value("svc-secret-disc"),
            clientAuth: clientAuth)
    }

    /// The MCP authorization spec's order: RFC 8414 inserted, OIDC inserted, OIDC appended.
    @Test func discoveryURLsFollowRFC8414ThenOIDC() throws {
        #expect(
            try AuthorizationServerMetadata.discoveryURLs(for: "https://H/o") == [
                "https://H/.well-known/oauth-authorization-server/o", "https://H/.well-known/openid-configuration/o",
                "https://H/o/.well-known/openid-configuration",
            ])
        #expect(
            try AuthorizationServerMetadata.discoveryURLs(for: "http://127.1:8080/a/../o/") == [
                "http://127.0.0.1:8080/.well-known/oauth-authorization-server/o",
                "http://127.0.0.1:8080/.well-known/openid-configuration/o",
                "http://127.0.0.1:8080/o/.well-known/openid-configuration",
            ])
        #expect(throws: AuthError.self) { try AuthorizationServerMetadata.discoveryURLs(for: "http://h/o") }
        #expect(
            try AuthorizationServerMetadata.discoveryURLs(for: "https://h:8443/") == [
                "https://h:8443/.well-known/oauth-authorization-server",
                "https://h:8443/.well-known/openid-configuration",
            ])
    }

    @Test func discoveredTokenEndpointIsUsed() async throws {
        let h = try await Harness(configuration: configuration(), transport: Self.server(Self.metadata()))
        _ = try await h.token()
        #expect(
            h.transport.requests.map(\.url) == [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server/o", "http://127.0.0.1:9000/o/token/",
            ])
    }

    @Test func openIDConfigurationIsTheFallback() async throws {
        let h = try await Harness(
            configuration: configuration(), transport: Self.server(Self.metadata(), rfc8414: false))
        _ = try await h.token()
        #expect(h.transport.tokenRequests.map(\.url) == ["http://127.0.0.1:9000/o/token/"])
    }

    @Test(arguments: [
        metadata(issuer: "http://127.0.0.1:9000"), metadata(issuer: "http://127.0.0.1:9000/o/"),
        metadata(token: "http://evil.example/token"), metadata(extra: #","jwks_uri":5"#), json("[]"), json("not json"),
    ])
    func untrustworthyMetadataSendsNothingToItsEndpoints(_ metadata: HTTPResponse) async throws {
        let h = try await Harness(configuration: configuration(), transport: Self.server(metadata))
        do {
            _ = try await h.token()
            Issue.record("accepted untrustworthy metadata")
        } catch let error as AuthError {
            #expect(error.errorKind == .auth)
        }
        #expect(h.transport.tokenRequests.isEmpty)
    }

    /// An issuer mismatch names both values (a trailing slash is hard to spot otherwise).
    @Test func anIssuerMismatchNamesTheConfiguredAndTheDiscoveredIssuer() async throws {
        let h = try await Harness(
            configuration: configuration(), transport: Self.server(Self.metadata(issuer: "http://127.0.0.1:9000/o/")))
        do {
            _ = try await h.token()
            Issue.record("accepted a mismatched issuer")
        } catch let error as AuthError {
            let text = "\(error)"
            #expect(text.contains("'http://127.0.0.1:9000/o/'"), "\(text)")
            #expect(text.contains("'\(Self.issuer)'"), "\(text)")
        }
    }

    @Test func tokenURLOverridesTheEndpointButNotTheTrustedIssuer() async throws {
        let h = try await Harness(
            configuration: configuration(tokenURL: "http://127.0.0.1:9000/custom/token"),
            transport: Self.server(Self.metadata(issuer: "http://127.0.0.1:9000/other")))
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.transport.tokenRequests.isEmpty)

        let good = try await Harness(
            configuration: configuration(tokenURL: "http://127.0.0.1:9000/custom/token"),
            transport: Self.server(Self.metadata()))
        _ = try await good.token()
        #expect(good.transport.tokenRequests.map(\.url) == ["http://127.0.0.1:9000/custom/token"])
    }

    @Test func unsupportedClientAuthenticationIsAConfigurationError() async throws {
        let metadata = Self.metadata(extra: #","token_endpoint_auth_methods_supported":["client_secret_post"]"#)
        let h = try await Harness(
            configuration: configuration(clientAuth: .clientSecretBasic), transport: Self.server(metadata))
        do {
            _ = try await h.token()
            Issue.record("should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .config)
            #expect(error.description.contains("client_secret_basic"))
        }
        #expect(h.transport.tokenRequests.isEmpty)
    }

    @Test func metadataIsCachedPerIssuer() async throws {
        let h = try await Harness(configuration: configuration(), transport: Self.server(Self.metadata()))
        let first = try await h.token()
        try await h.manager.invalidate(h.key, stamp: CredentialStamp(first.version))
        _ = try await h.token()
        #expect(h.transport.requests.filter { $0.method == "GET" }.count == 1)
        #expect(h.transport.tokenRequests.count == 2)
    }

    /// RFC 8705 §5: a mutual-TLS client uses the aliases; a bearer client the plain endpoints; an
    /// alias that is not an allowed URL is left out rather than failing the whole document.
    @Test func mutualTLSAliasesAreUsedByCertificateClientsOnly() throws {
        let body =
            #"{"issuer":"\#(Self.issuer)","token_endpoint":"http://127.0.0.1:9000/o/token/","#
            + #""revocation_endpoint":"http://127.0.0.1:9000/o/revoke/","mtls_endpoint_aliases":{"#
            + #""token_endpoint":"http://127.0.0.1:9443/o/token/","revocation_endpoint":"http://evil.example/revoke"}}"#
        let metadata = try AuthorizationServerMetadata.parse(Array(body.utf8), expectedIssuer: Self.issuer)
        #expect(metadata.mtlsEndpointAliases == ["token_endpoint": "http://127.0.0.1:9443/o/token/"])
        #expect(
            metadata.endpoint("token_endpoint", plain: metadata.tokenEndpoint, mutualTLS: true)
                == "http://127.0.0.1:9443/o/token/")
        #expect(
            metadata.endpoint("token_endpoint", plain: metadata.tokenEndpoint, mutualTLS: false)
                == "http://127.0.0.1:9000/o/token/")
        #expect(
            metadata.endpoint("revocation_endpoint", plain: metadata.revocationEndpoint, mutualTLS: true)
                == "http://127.0.0.1:9000/o/revoke/")
    }

    /// The metadata's `Cache-Control` bounds how long it is kept: `no-store` means fetched again
    /// for the next acquisition (a server rotating its endpoints is followed at once).
    @Test func metadataMarkedNoStoreIsFetchedAgain() async throws {
        let metadata = json(
            #"{"issuer":"\#(Self.issuer)","token_endpoint":"http://127.0.0.1:9000/o/token/"}"#,
            headers: [("Cache-Control", "no-store")])
        let h = try await Harness(configuration: configuration(), transport: Self.server(metadata))
        let first = try await h.token()
        try await h.manager.invalidate(h.key, stamp: CredentialStamp(first.version))
        _ = try await h.token()
        #expect(h.transport.requests.filter { $0.method == "GET" }.count == 2)
    }

    /// A harness whose every request fails with `error`, after its acquisition failed with kind `transport`.
    func failedAcquisition(_ error: HTTPError) async throws -> Harness {
        let h = try await Harness(
            configuration: configuration(), transport: FakeTransport { _ in .failure(error) },
            clock: FakeClock(autoAdvance: true))
        do {
            _ = try await h.token()
            Issue.record("should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .transport)
        }
        #expect(h.transport.tokenRequests.isEmpty)
        return h
    }

    @Test func unreachableIssuerIsRetriedThenATransportError() async throws {
        let h = try await failedAcquisition(.transport("connection refused"))
        // Five passes over the three discovery URLs of a path issuer, with backoff between them; no
        // token request.
        #expect(h.transport.requests.count == 3 * RetryPolicy().maximumAttempts)
        #expect(h.clock.sleeps.count == RetryPolicy().maximumAttempts - 1)
    }

    @Test func aTLSFailureAtTheIssuerIsFinalAndTriedOnce() async throws {
        let h = try await failedAcquisition(.tls("SSL certificate problem: self-signed certificate"))
        #expect(h.transport.requests.count == 1, "no retry, not even the second discovery URL")
        #expect(h.clock.sleeps.isEmpty)
    }

    @Test(arguments: [
        Result<HTTPResponse, HTTPError>.failure(.transport("connection refused")), .success(HTTPResponse(status: 503)),
        .success(HTTPResponse(status: 429)), .success(HTTPResponse(status: 500)),
    ])
    func transientDiscoveryFailuresAreRetried(_ failure: Result<HTTPResponse, HTTPError>) async throws {
        let transport = Self.server(Self.metadata())
        transport.enqueue(failure, failure)
        let h = try await Harness(
            configuration: configuration(), transport: transport, clock: FakeClock(autoAdvance: true))
        #expect(try await h.token().accessToken == "at-1")
        // The first pass: two failures and a 404 (OIDC inserted); the second finds RFC 8414's.
        #expect(transport.requests.filter { $0.method == "GET" }.count == 4)
        #expect(h.clock.sleeps.count == 1)
    }

    @Test func missingMetadataIsNotRetried() async throws {
        let transport = FakeTransport { _ in .success(HTTPResponse(status: 404)) }
        let h = try await Harness(
            configuration: configuration(), transport: transport, clock: FakeClock(autoAdvance: true))
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(transport.requests.count == 3)
        #expect(h.clock.sleeps.isEmpty)
    }
}
