import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

@Suite(.timeLimit(.minutes(5)))
struct TokenEndpointTests {
    static let oddID = "a b:c%d"
    static let oddSecret = "s&e=c r+t:%é"

    func configuration(_ method: ClientAuthMethod, secret: String? = oddSecret) -> OAuthClientConfiguration {
        OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: Self.oddID, clientSecret: secret.map { .value($0) },
            clientAuth: method, scopes: ["write", "read", "read"], audience: "https://api.example/a b",
            resources: ["https://r2.example", "https://r1.example"])
    }

    @Test func formEncodingKeepsUnreservedAndEscapesTheRest() {
        #expect(FormBody.encode("a b:c%d") == "a+b%3Ac%25d")
        #expect(FormBody.encode("AZaz09-._*~/?&=+é") == "AZaz09-._*%7E%2F%3F%26%3D%2B%C3%A9")
        #expect(FormBody.encode("a b", spaceAsPlus: false) == "a%20b")
    }

    @Test func clientSecretBasicFormEncodesIdAndSecretBeforeBase64() async throws {
        let h = try await Harness(configuration: configuration(.clientSecretBasic))
        _ = try await h.token()
        let request = try #require(h.transport.tokenRequests.first)
        let expected = "a+b%3Ac%25d:s%26e%3Dc+r%2Bt%3A%25%C3%A9"
        #expect(request.headers["Authorization"] == "Basic " + Data(expected.utf8).base64EncodedString())
        #expect(request.headers["Accept"] == "application/json")
        #expect(request.headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(request.method == "POST")
        let form = Harness.form(request)
        #expect(form["client_secret"] == nil)
        #expect(form["client_id"] == nil)
        #expect(form["grant_type"] == "client_credentials")
    }

    @Test func clientSecretPostSendsIdAndSecretInTheBody() async throws {
        let h = try await Harness(configuration: configuration(.clientSecretPost))
        _ = try await h.token()
        let request = try #require(h.transport.tokenRequests.first)
        #expect(request.headers["Authorization"] == nil)
        let form = Harness.form(request)
        #expect(form["client_id"] == Self.oddID)
        #expect(form["client_secret"] == Self.oddSecret)
    }

    @Test func publicClientSendsNoSecretAtAll() async throws {
        let h = try await Harness(configuration: configuration(.none))
        _ = try await h.token()
        let request = try #require(h.transport.tokenRequests.first)
        #expect(request.headers["Authorization"] == nil)
        let body = String(decoding: request.body ?? [], as: UTF8.self)
        #expect(!body.contains("client_secret"))
        #expect(!body.contains(FormBody.encode(Self.oddSecret)))
        #expect(Harness.form(request)["client_id"] == Self.oddID)
    }

    /// RFC 7523 §3.1 (SPEC §10): a jwt-bearer session without a client id names no client; with
    /// one, it is sent as for any public client.
    @Test func aJWTBearerSessionWithoutClientIDNamesNoClient() async throws {
        for clientID in ["", "workload"] {
            let configuration = OAuthClientConfiguration(
                tokenURL: "https://as.example/token", clientID: clientID, clientAuth: .none,
                grant: .jwtBearer(.secret(.value("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"))))
            #expect(throws: Never.self) { try configuration.validate() }
            let h = try await Harness(configuration: configuration)
            _ = try await h.token()
            let request = try #require(h.transport.tokenRequests.first)
            #expect(request.headers["Authorization"] == nil)
            let form = Harness.form(request)
            #expect(form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer")
            #expect(form["client_id"] == (clientID.isEmpty ? nil : clientID))
        }
        // Another grant, or a client authentication, still needs the id.
        let credentials = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "", clientAuth: .none)
        #expect(throws: AuthError.self) { try credentials.validate() }
    }

    @Test func grantParametersAreSortedAndRepeated() async throws {
        let h = try await Harness(configuration: configuration(.clientSecretBasic))
        _ = try await h.token()
        let pairs = Harness.formPairs(try #require(h.transport.tokenRequests.first))
        #expect(pairs.map(\.0) == ["grant_type", "scope", "audience", "resource", "resource"])
        #expect(
            pairs.map(\.1) == [
                "client_credentials", "read write", "https://api.example/a b", "https://r1.example",
                "https://r2.example",
            ])
        let body = String(decoding: h.transport.tokenRequests[0].body ?? [], as: UTF8.self)
        #expect(body.contains("scope=read+write"))
    }

    @Test(arguments: [
        "http://as.example/token", "http://10.0.0.1/token", "ftp://127.0.0.1/token", "https://user:pw@as.example/t",
        "token",
    ])
    func insecureOrMalformedTokenURLsAreRejectedBeforeSending(url: String) async throws {
        let manager = TokenManager(transport: FakeTransport())
        do {
            try await manager.register(
                environment: "e", profile: "p",
                configuration: OAuthClientConfiguration(
                    tokenURL: url, clientID: "svc", clientSecret: .value("abcd-secret")))
            Issue.record("accepted \(url)")
        } catch {
            #expect(error.errorKind == .config)
        }
    }

    @Test(arguments: [
        "http://127.0.0.1:9000/o/token/", "http://127.1.2.3/t", "http://localhost:8080/t", "http://[::1]:80/t",
        "https://as.example/t",
    ])
    func loopbackHTTPAndHTTPSTokenURLsAreAccepted(url: String) async throws {
        let h = try await Harness(
            configuration: OAuthClientConfiguration(tokenURL: url, clientID: "svc", clientSecret: .value("abcd-secret"))
        )
        _ = try await h.token()
        #expect(h.transport.tokenRequests.first?.url == url)
    }

    @Test func missingSecretForAConfidentialMethodIsAConfigurationError() async throws {
        let manager = TokenManager(transport: FakeTransport())
        await #expect(throws: AuthError.self) {
            try await manager.register(
                environment: "e", profile: "p",
                configuration: OAuthClientConfiguration(tokenURL: "https://as.example/t", clientID: "svc"))
        }
    }

    @Test func sessionKeysSeparateEverythingThatChangesTheToken() {
        let base = OAuthClientConfiguration(tokenURL: "https://as/t", clientID: "c", scopes: ["b", "a"])
        let same = OAuthClientConfiguration(tokenURL: "https://as/t", clientID: "c", scopes: ["a", "b"])
        #expect(
            SessionKey(environment: "e", profile: "p", configuration: base)
                == SessionKey(environment: "e", profile: "p", configuration: same))
        var other = base
        other.audience = "x"
        #expect(
            SessionKey(environment: "e", profile: "p", configuration: base)
                != SessionKey(environment: "e", profile: "p", configuration: other))
        #expect(
            SessionKey(environment: "e", profile: "p", configuration: base)
                != SessionKey(environment: "e2", profile: "p", configuration: base))
    }
}
