import TestSupport
import Testing

@testable import TokenRelayConfig

/// The keys of SPEC §10 in the decoder: private_key_jwt's client key and its diagnostics.
@Suite struct ProofOfPossessionConfigTests {
    static let pem =
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"

    func client(_ result: ConfigLoadResult) -> OAuthClientSettings? {
        guard case .clientCredentials(let client)? = result.settings?.environments.first?.profiles.first?.kind else {
            return nil
        }
        return client
    }

    @Test func privateKeyJWTDecodesWithItsKeyAndOptions() async throws {
        let files = InMemoryFileSystem(["/cfg/client.key": Self.pem])
        let result = await decodeConfig(
            profileConfig(
                """
                type: client_credentials
                issuer: https://as.example.com
                client_id: app
                client_key: { file: client.key }
                client_key_alg: PS256
                client_key_id: k1
                client_assertion_audience: issuer
                """), files: files)
        let settings = try #require(client(result), "\(result.diagnostics.map(\.rendered))")
        #expect(settings.clientAuth == .privateKeyJWT)
        #expect(settings.clientKey?.algorithm == "PS256" && settings.clientKey?.keyID == "k1")
        #expect(settings.clientKey?.audience == .issuer)
        // A PEM key keeps its lines (a one-line secret may not have any).
        #expect(try await settings.clientKey?.key.resolve() == String(Self.pem.dropLast()))
    }

    @Test(arguments: [
        ("client_auth: private_key_jwt", "needs a 'client_key'"),
        ("client_key: { file: k }\nclient_secret: { env: S }", "both set"),
        ("client_auth: client_secret_post\nclient_secret: { env: S }\nclient_key: { file: k }", "is used by"),
        ("client_key: { file: k }\nclient_key_alg: HS256", "client_key_alg"),
        ("client_key_id: k1", "only applies with a 'client_key'"),
        ("client_key: { file: k }\nclient_assertion_audience: issuer", "needs an 'issuer'"),
        // Mutual TLS: the certificate and its key, one authentication, no assertion settings.
        ("client_auth: tls_client_auth\nclient_key: { file: k }", "needs a 'client_cert'"),
        (
            "client_auth: tls_client_auth\nclient_cert: { file: c }\nclient_key: { file: k }\nclient_secret: { env: S }",
            "remove 'client_secret'"
        ),
        (
            "client_auth: tls_client_auth\nclient_cert: { file: c }\nclient_key: { file: k }\nclient_key_id: k1",
            "applies to private_key_jwt"
        ),
        ("client_cert: { file: c }", "is used by 'client_auth: tls_client_auth'"),
        ("mtls_bound: true", "needs a mutual-TLS 'client_auth'"),
        // Discovered sessions carry no DPoP key or certificate yet: refused, not sent as bearer.
        ("discover: true\ndpop: true", "not supported with 'discover: true'"),
    ])
    func misusesAreDiagnosed(_ lines: String, _ expected: String) async {
        let result = await decodeConfig(
            profileConfig(
                "type: client_credentials\ntoken_url: https://as.example.com/token\nclient_id: app\n" + lines),
            environment: ["HOME": "/home/u", "S": "secret-value"])
        #expect(result.settings == nil)
        #expect(result.errors.contains { $0.message.contains(expected) }, "\(result.diagnostics.map(\.rendered))")
    }

    @Test func checkConfigResolvingSecretsRefusesAKeyThatIsNotAPEMPrivateKeyByItsKey() async {
        let files = InMemoryFileSystem([
            "/cfg/client.key":
                "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"
        ])
        let result = await decodeConfig(
            profileConfig(
                "type: client_credentials\ntoken_url: https://as.example.com/token\nclient_id: app\nclient_key: { file: client.key }"
            ), mode: .check(resolveSecrets: true), files: files)
        #expect(
            result.errors.contains { $0.message.contains("client_key") && $0.message.contains("not a PEM private key") }
        )
        #expect(!result.diagnostics.contains { $0.message.contains("MFkwEwYH") })
    }
}

/// token_exchange profiles: their references are checked in their environment.
@Suite struct TokenExchangeConfigTests {
    func config(_ profiles: String) -> String {
        """
        version: 1
        environments:
          e:
            base_url: https://api.example.com
            profiles:
        \(profiles)
        """
    }

    @Test(arguments: [
        (
            "      x:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n        subject: { profile: nope }\n",
            "does not have"
        ),
        (
            "      x:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n        subject: { profile: y }\n      y:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n        subject: { profile: x }\n",
            "cycle"
        ),
        (
            "      x:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n",
            "needs 'subject"
        ),
        (
            "      x:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n        subject: { profile: k }\n      k:\n        type: bearer\n        token: { env: T }\n",
            "a bearer profile"
        ),
    ])
    func badReferencesAreDiagnosed(_ profiles: String, _ expected: String) async {
        let result = await decodeConfig(config(profiles))
        #expect(result.settings == nil)
        #expect(result.errors.contains { $0.message.contains(expected) }, "\(result.diagnostics.map(\.rendered))")
    }

    @Test func shortTokenTypeNamesBecomeTheirURIs() async throws {
        let result = await decodeConfig(
            config(
                "      x:\n        type: token_exchange\n        token_url: https://as/t\n        client_id: a\n        subject_token: { env: S }\n        requested_token_type: jwt\n"
            ))
        guard case .tokenExchange(_, let exchange)? = result.settings?.environments.first?.profiles.first?.kind else {
            Issue.record("\(result.diagnostics.map(\.rendered))")
            return
        }
        #expect(exchange.subjectTokenType == "urn:ietf:params:oauth:token-type:access_token")
        #expect(exchange.requestedTokenType == "urn:ietf:params:oauth:token-type:jwt")
    }
}

/// A `jwt_bearer` profile may name no client (RFC 7523 §3.1, SPEC §10); nothing that would
/// authenticate one goes without its id.
@Suite struct AnonymousJWTBearerConfigTests {
    static let profile = "type: jwt_bearer\ntoken_url: https://as.example.com/token\nassertion: { env: A }"

    @Test func aJWTBearerProfileWithoutClientIDDecodes() async throws {
        let result = await decodeConfig(profileConfig(Self.profile))
        #expect(!result.hasErrors, "\(result.diagnostics.map(\.rendered))")
        guard case .jwtBearer(let client, _)? = result.settings?.environments.first?.profiles.first?.kind else {
            Issue.record("\(result.diagnostics.map(\.rendered))")
            return
        }
        #expect(client.clientID.isEmpty)
        #expect(client.clientAuth == .none)
    }

    @Test(arguments: [
        "client_secret: { env: S }", "client_key: { file: k }", "client_auth: client_secret_post",
        "client_auth: tls_client_auth\nclient_cert: { file: c }\nclient_key: { file: k }",
    ])
    func whatAuthenticatesAClientNeedsItsID(_ lines: String) async {
        let result = await decodeConfig(
            profileConfig(Self.profile + "\n" + lines), environment: ["HOME": "/home/u", "S": "secret-value"])
        #expect(result.settings == nil)
        #expect(
            result.errors.contains { $0.message.contains("authenticates a client: it needs a 'client_id'") },
            "\(result.diagnostics.map(\.rendered))")
    }

    @Test func clientAuthNoneNeedsNoID() async {
        let result = await decodeConfig(profileConfig(Self.profile + "\nclient_auth: none"))
        #expect(!result.hasErrors, "\(result.diagnostics.map(\.rendered))")
    }

    @Test(arguments: ["client_credentials", "token_exchange\nsubject_token: { env: T }"])
    func otherGrantsStillNeedAClientID(_ type: String) async {
        let result = await decodeConfig(profileConfig("type: \(type)\ntoken_url: https://as.example.com/token"))
        #expect(result.errors.contains { $0.message.contains("needs a 'client_id'") })
    }
}
