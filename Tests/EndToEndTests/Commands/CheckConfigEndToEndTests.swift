import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay check-config` and serving with a bad config, through the real binary.
@Suite struct CheckConfigEndToEndTests {
    /// Runs the binary to completion with the example's variables unset.
    static func run(_ arguments: [String]) async throws -> (code: Int32, process: RelayProcess) {
        var unset: [String: String] = [:]
        for name in ["STAGING_CLIENT_SECRET", "STAGING_API_KEY", "LOCAL_TOKEN", "LOCAL_PORT"] { unset[name] = "" }
        let process = try RelayProcess(arguments, environment: unset, testMethods: false)
        try process.closeStdin()
        return (try await process.exitCode(), process)
    }

    static let typo = """
        version: 1
        environments:
          local:
            base_ulr: http://127.0.0.1:9
        """

    @Test func exampleConfigIsValidWithItsVariablesUnset() async throws {
        let example = RelayProcess.repositoryRoot.appendingPathComponent("config.example.yaml").path
        let (code, process) = try await Self.run(["check-config", "--config", example])
        #expect(code == 0, "\(process.stderrText)")
        #expect(!process.stderrText.contains(": error:"), "\(process.stderrText)")
        #expect(process.stderrText.contains("warning"), "variables unset and interactive profiles give warnings only")
    }

    @Test func typoedKeyExitsOneWithFileLineColumnAndADidYouMean() async throws {
        let path = try TemporaryDirectory.file(Self.typo)
        let (code, process) = try await Self.run(["check-config", "--config", path])
        #expect(code == 1)
        let output = process.stderrText + process.stdoutText
        #expect(output.contains("\(path):4:5"), "\(output)")
        #expect(output.contains("base_url"), "\(output)")
        #expect(output.lowercased().contains("did you mean"), "\(output)")
    }

    @Test func jsonOutputParsesWithFileLineColumnSeverityMessage() async throws {
        let path = try TemporaryDirectory.file(Self.typo)
        let (code, process) = try await Self.run(["check-config", "--config", path, "--json"])
        #expect(code == 1)
        let items = try #require(try JSONParser.parse(process.stdoutText).arrayValue)
        let first = try #require(items.first { $0["severity"] == "error" })
        #expect(first["file"]?.stringValue == path)
        #expect(first["line"] == .int(4))
        #expect(first["column"] == .int(5))
        #expect(first["message"]?.stringValue?.contains("base_url") == true)

        let example = RelayProcess.repositoryRoot.appendingPathComponent("config.example.yaml").path
        let valid = try await Self.run(["check-config", "--config", example, "--json"])
        #expect(valid.code == 0)
        let warnings = try #require(try JSONParser.parse(valid.process.stdoutText).arrayValue)
        #expect(warnings.allSatisfy { $0["severity"] != "error" })
    }

    /// SPEC §10: `--resolve-secrets` parses every key and certificate it resolves, as the requests
    /// will: a `client_key` that is no private key, and a key that is not its certificate's, are
    /// errors at their settings, and no byte of them is printed.
    @Test func resolvingSecretsParsesEveryKeyAndCertificate() async throws {
        let directory = try TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(at: directory) }
        let canary = "CanaryKeyBody\(UUID().uuidString.replacingOccurrences(of: "-", with: ""))"
        let fixtures = RelayProcess.repositoryRoot.appendingPathComponent("Tests/TestSupport/Fixtures")
        let badKey = directory.appendingPathComponent("bad.key").path
        let otherKey = directory.appendingPathComponent("other.key").path
        try Data("-----BEGIN PRIVATE KEY-----\n\(canary)\n-----END PRIVATE KEY-----\n".utf8).write(
            to: URL(fileURLWithPath: badKey))
        let made = try await InteropStack.run(
            "/usr/bin/openssl",
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", otherKey],
            in: directory, timeout: .seconds(60))
        #expect(made.status == 0, "\(made.stderr)")
        for path in [badKey, otherKey] { chmod(path, 0o600) }
        let config = directory.appendingPathComponent("config.yaml").path
        try Data(
            """
            version: 1
            environments:
              e:
                base_url: https://api.example.com
                profiles:
                  signed:
                    type: client_credentials
                    token_url: https://as.example.com/token
                    client_id: app
                    client_key: { file: \(badKey) }
                  mtls:
                    type: client_credentials
                    token_url: https://as.example.com/token
                    client_id: app
                    client_auth: tls_client_auth
                    client_cert: { file: \(fixtures.appendingPathComponent("test_cert.pem").path) }
                    client_key: { file: \(otherKey) }

            """.utf8
        ).write(to: URL(fileURLWithPath: config))
        let (code, process) = try await Self.run(["check-config", "--resolve-secrets", "--config", config])
        let output = process.stderrText + process.stdoutText
        #expect(code == 1, "\(output)")
        #expect(output.contains("\(config):10:21: error:"), "\(output)")
        #expect(output.contains("client_key is not a readable unencrypted PEM private key"), "\(output)")
        #expect(output.contains("\(config):17:21: error:"), "\(output)")
        #expect(output.contains("client_key is not the private key of client_cert's certificate"), "\(output)")
        #expect(!output.contains(canary))
        let other = try String(contentsOfFile: otherKey, encoding: .utf8)
        #expect(pemBodyLines(other).allSatisfy { !output.contains($0) })
        // Without the option nothing is read.
        #expect(try await Self.run(["check-config", "--config", config]).code == 0)
    }

    @Test func tabIndentationIsAClearErrorAtItsLine() async throws {
        let path = try TemporaryDirectory.file("version: 1\nenvironments:\n  local:\n\tbase_url: http://127.0.0.1:9\n")
        let (code, process) = try await Self.run(["check-config", "--config", path])
        #expect(code == 1)
        let output = process.stderrText + process.stdoutText
        #expect(output.contains("\(path):4:"), "\(output)")
        #expect(output.lowercased().contains("tab"), "\(output)")
    }

    @Test func missingConfigFileIsFatal() async throws {
        let path = try TemporaryDirectory.make().appendingPathComponent("absent.yaml").path
        let (code, process) = try await Self.run(["check-config", "--config", path])
        #expect(code == 1)
        #expect((process.stderrText + process.stdoutText).contains("absent.yaml"))
        let serving = try await Self.run(["serve", "--config", path])
        #expect(serving.code == 3)
        #expect(serving.process.stdoutText.isEmpty)
    }

    @Test func servingWithAnInvalidConfigExitsThreeWithNothingOnStdout() async throws {
        let path = try TemporaryDirectory.file(Self.typo)
        let (code, process) = try await Self.run(["serve", "--config", path])
        #expect(code == 3)
        #expect(process.stdoutText.isEmpty)
        #expect(process.stderrText.contains("\(path):4:5"), "\(process.stderrText)")
    }
}
