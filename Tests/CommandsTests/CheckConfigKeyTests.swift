import Foundation
import TestSupport
import Testing
import TokenRelayCommands

@testable import TokenRelayConfig

/// `check-config --resolve-secrets` reads every client key and certificate as the token requests
/// will (SPEC §10): with TokenRelayAuth's code, the requests' own. An error is at the setting's
/// `file:line:column`, names what is wrong, and never holds the value.
@Suite struct CheckConfigKeyTests {
    static func fixture(_ name: String) throws -> String {
        try String(contentsOfFile: repositoryRoot + "/Tests/TestSupport/Fixtures/" + name, encoding: .utf8)
    }

    /// A PEM-looking text whose body is no key (and a canary that must never be printed).
    static let canary = "CanarySecretKeyBody0123456789abcdefABCDEF"
    static let fakeKey = "-----BEGIN PRIVATE KEY-----\n\(canary)\n-----END PRIVATE KEY-----\n"
    static let fakeCertificate = "-----BEGIN CERTIFICATE-----\n\(canary)\n-----END CERTIFICATE-----\n"
    /// A P-256 key that is not the fixture certificate's.
    static let otherKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgh58/KaBQPeR7c8s6
        niA08PIdurIsT8i9ORqLE8fdyimhRANCAASBq8VnqzXqtd/YR7cLCZQ5CMuqBiOK
        o2u2IBpJ/7RVepAobEvwztvQkhIKVy8nyRCrfaaBEvRk6dEViJfb9rx4
        -----END PRIVATE KEY-----

        """

    /// private_key_jwt: `client_key` (the value's mapping) is at 10:21.
    static let assertionProfile = profileConfig(
        "type: client_credentials\ntoken_url: https://as.example.com/token\nclient_id: app\n"
            + "client_key: { file: /k/key.pem }")
    /// Mutual TLS: `client_cert` at 11:22, `client_key` at 12:21.
    static let mutualTLSProfile = profileConfig(
        "type: client_credentials\ntoken_url: https://as.example.com/token\nclient_id: app\n"
            + "client_auth: tls_client_auth\nclient_cert: { file: /k/cert.pem }\nclient_key: { file: /k/key.pem }")

    func check(_ config: String, _ files: [String: String], resolve: Bool = true) async -> (Int32, String) {
        let (status, output) = await runCheckConfig(
            ["--config", "/c.yaml"] + (resolve ? ["--resolve-secrets"] : []),
            files: InMemoryFileSystem(files.merging(["/c.yaml": config]) { $1 }))
        return (status, output.standardError + output.standardOutput)
    }

    @Test func aClientKeyThatIsNoPrivateKeyIsAnErrorAtItsSetting() async {
        let (status, output) = await check(Self.assertionProfile, ["/k/key.pem": Self.fakeKey])
        #expect(status == 1, "\(output)")
        #expect(
            output.contains(
                "/c.yaml:10:21: error: the secret 'environments.e.profiles.p.client_key' from file /k/key.pem: "
                    + "client_key is not a readable unencrypted PEM private key"), "\(output)")
        #expect(!output.contains(Self.canary))
        // Without --resolve-secrets nothing is read.
        #expect(await check(Self.assertionProfile, ["/k/key.pem": Self.fakeKey], resolve: false).0 == 0)
    }

    @Test func aClientKeyThatDoesNotFitItsAlgorithmIsAnError() async throws {
        let key = try Self.fixture("test_key.pem")
        let (status, output) = await check(
            Self.assertionProfile + "        client_key_alg: RS256\n", ["/k/key.pem": key])
        #expect(status == 1, "\(output)")
        #expect(output.contains("/c.yaml:10:21: error:") && output.contains("does not fit client_key_alg RS256"))
        #expect(pemLines(key).allSatisfy { !output.contains($0) })
        #expect(await check(Self.assertionProfile, ["/k/key.pem": key]).0 == 0)
    }

    @Test func aCertificateAndItsKeyPass() async throws {
        let files = ["/k/cert.pem": try Self.fixture("test_cert.pem"), "/k/key.pem": try Self.fixture("test_key.pem")]
        let (status, output) = await check(Self.mutualTLSProfile, files)
        #expect(status == 0, "\(output)")
    }

    @Test func aCertificateThatDoesNotParseIsAnErrorAtItsSetting() async throws {
        let files = ["/k/cert.pem": Self.fakeCertificate, "/k/key.pem": try Self.fixture("test_key.pem")]
        let (status, output) = await check(Self.mutualTLSProfile, files)
        #expect(status == 1, "\(output)")
        #expect(
            output.contains(
                "/c.yaml:11:22: error: the secret 'environments.e.profiles.p.client_cert' from file /k/cert.pem: "
                    + "client_cert holds no readable PEM certificate"), "\(output)")
        #expect(!output.contains(Self.canary))
    }

    @Test func aDamagedCertificateAfterTheFirstIsAnError() async throws {
        let chain = try Self.fixture("test_cert.pem") + Self.fakeCertificate
        let files = ["/k/cert.pem": chain, "/k/key.pem": try Self.fixture("test_key.pem")]
        let (status, output) = await check(Self.mutualTLSProfile, files)
        #expect(status == 1, "\(output)")
        #expect(output.contains("/c.yaml:11:22: error:") && output.contains("a damaged chain"), "\(output)")
        #expect(!output.contains(Self.canary))
    }

    @Test func aKeyThatIsNotTheCertificatesIsAnErrorAtTheKey() async throws {
        let files = ["/k/cert.pem": try Self.fixture("test_cert.pem"), "/k/key.pem": Self.otherKey]
        let (status, output) = await check(Self.mutualTLSProfile, files)
        #expect(status == 1, "\(output)")
        #expect(
            output.contains("/c.yaml:12:21: error:")
                && output.contains("client_key is not the private key of client_cert's certificate"), "\(output)")
        #expect(pemLines(Self.otherKey).allSatisfy { !output.contains($0) })
        let unreadable = ["/k/cert.pem": try Self.fixture("test_cert.pem"), "/k/key.pem": Self.fakeKey]
        let second = await check(Self.mutualTLSProfile, unreadable)
        #expect(second.0 == 1 && second.1.contains("/c.yaml:12:21: error:"), "\(second.1)")
        #expect(!second.1.contains(Self.canary))
    }

    @Test func keysAreReadEvenWhenAnotherSettingIsWrong() async {
        let config = Self.assertionProfile.replacingOccurrences(
            of: "    base_url: https://api.example.com\n",
            with: "    base_url: https://api.example.com\n    timout: 5s\n")
        let (status, output) = await check(config, ["/k/key.pem": Self.fakeKey])
        #expect(status == 1)
        #expect(output.contains("unknown key 'timout'") && output.contains("client_key is not a readable"), "\(output)")
    }

    /// The body lines of a PEM text.
    func pemLines(_ pem: String) -> [String] {
        pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 16 }
    }
}
