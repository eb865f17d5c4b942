import Foundation
import TestSupport
import Testing
import TokenRelayCommands

@testable import TokenRelayConfig

@Suite struct CheckConfigCommandTests {
    static let valid = "version: 1\nenvironments:\n  e:\n    base_url: https://api.example.com\n"
    static let invalid = "version: 1\nenvironments:\n  e:\n    base_url: https://api.example.com\n    timout: 5s\n"

    @Test func validConfigExitsZeroWithASummary() async {
        let files = InMemoryFileSystem(["/c.yaml": Self.valid])
        let (status, output) = await runCheckConfig(["--config", "/c.yaml"], files: files)
        #expect(status == 0)
        #expect(output.standardOutput.isEmpty)
        #expect(output.standardError == "/c.yaml: valid (0 errors, 0 warnings)\n")
    }

    @Test func invalidConfigExitsOneWithLocatedDiagnostics() async {
        let files = InMemoryFileSystem(["/c.yaml": Self.invalid])
        let (status, output) = await runCheckConfig(["--config=/c.yaml"], files: files)
        #expect(status == 1)
        #expect(output.standardOutput.isEmpty)
        let lines = output.standardError.split(separator: "\n")
        #expect(lines.first == "/c.yaml:5:5: error: unknown key 'timout' in environment 'e'; did you mean 'timeout'?")
        #expect(lines.last == "/c.yaml: invalid (1 error, 0 warnings)")
    }

    @Test func warningsAloneStillExitZero() async {
        let files = InMemoryFileSystem(["/c.yaml": bearerConfig("inline-token-value")])
        let (status, output) = await runCheckConfig(["--config", "/c.yaml"], files: files)
        #expect(status == 0)
        #expect(output.standardError.contains("/c.yaml:8:16: warning: inline secret"))
    }

    @Test(arguments: [["--bogus"], ["--config"], ["--config="], ["extra"]])
    func usageErrorsExitTwo(arguments: [String]) async {
        let (status, output) = await runCheckConfig(arguments)
        #expect(status == 2)
        #expect(output.standardError.contains("usage: tokenrelay check-config"))
        #expect(output.standardOutput.isEmpty)
    }

    @Test func helpPrintsUsageOnStdout() async {
        let (status, output) = await runCheckConfig(["--help"])
        #expect(status == 0)
        #expect(output.standardOutput.hasPrefix("usage: tokenrelay check-config"))
    }

    @Test func jsonOutputListsEveryDiagnostic() async throws {
        let files = InMemoryFileSystem([
            "/c.yaml": Self.invalid + "    headers: { X-A: \"quote\\\"d\" }\n    proxy: ftp://x\n"
        ])
        let (status, output) = await runCheckConfig(["--json", "--config", "/c.yaml"], files: files)
        #expect(status == 1)
        #expect(output.standardError.isEmpty)
        let parsed = try JSONSerialization.jsonObject(with: Data(output.standardOutput.utf8)) as? [[String: Any]]
        let items = try #require(parsed)
        #expect(items.count == 2)
        #expect(items.allSatisfy { Set($0.keys) == ["file", "line", "column", "severity", "message"] })
        #expect(items.first?["line"] as? Int == 5)
        #expect(items.first?["column"] as? Int == 5)
        #expect(items.first?["severity"] as? String == "error")
        #expect(items.first?["file"] as? String == "/c.yaml")
    }

    @Test func framingAndHopByHopHeadersAreReportedWithTheirPlace() async {
        let files = InMemoryFileSystem([
            "/c.yaml": Self.valid + "    headers: { Host: evil.example.com }\n"
                + "    profiles:\n      k: { type: api_key, header: Transfer-Encoding, value: { env: K } }\n"
        ])
        let (status, output) = await runCheckConfig(["--config", "/c.yaml"], files: files)
        #expect(status == 1)
        let lines = output.standardError.split(separator: "\n").map(String.init)
        #expect(
            lines.contains(
                "/c.yaml:5:16: error: header 'Host' in 'environments.e.headers' is set by the transport"
                    + " (a framing, hop-by-hop, Proxy-* or pseudo-header field) and cannot be configured"),
            "got \(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix(
                    "/c.yaml:7:35: error: 'environments.e.profiles.k.header' 'Transfer-Encoding' is set by the transport"
                )
            },
            "got \(lines)")
        #expect(lines.last == "/c.yaml: invalid (2 errors, 0 warnings)")
    }

    @Test func jsonOutputForAValidConfigIsAnEmptyArray() async {
        let files = InMemoryFileSystem(["/c.yaml": Self.valid])
        let (status, output) = await runCheckConfig(["--json", "--config", "/c.yaml"], files: files)
        #expect(status == 0)
        #expect(output.standardOutput == "[]\n")
    }

    @Test func missingExplicitFileIsFatal() async {
        let (status, output) = await runCheckConfig(["--config", "/nope.yaml"])
        #expect(status == 1)
        #expect(output.standardError.contains("/nope.yaml: error: config file not found"))
        let (fromVariable, _) = await runCheckConfig(
            [], environment: ["TOKENRELAY_CONFIG": "/nope.yaml", "HOME": "/h"])
        #expect(fromVariable == 1)
    }

    @Test func missingImplicitDefaultOnlyWarns() async throws {
        let (status, output) = await runCheckConfig([], environment: ["XDG_CONFIG_HOME": "/xdg", "HOME": "/h"])
        #expect(status == 0)
        #expect(output.standardError.contains("/xdg/tokenrelay/config.yaml: warning: no config file here"))
        let result = await ConfigLoader(fileSystem: InMemoryFileSystem()).load(
            path: nil, environment: ["HOME": "/h"], mode: .serve)
        #expect(result.settings?.environments.isEmpty == true)
        #expect(result.warnings.first?.file == "/h/.config/tokenrelay/config.yaml")
    }

    @Test func locationPrefersFlagThenVariableThenXDGThenHome() {
        let all = ["TOKENRELAY_CONFIG": "/v.yaml", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"]
        #expect(
            ConfigLoader.locate(path: "/f.yaml", environment: all) == ConfigLocation(path: "/f.yaml", isExplicit: true))
        #expect(ConfigLoader.locate(path: nil, environment: all) == ConfigLocation(path: "/v.yaml", isExplicit: true))
        #expect(
            ConfigLoader.locate(path: nil, environment: ["XDG_CONFIG_HOME": "/xdg", "HOME": "/h"])
                == ConfigLocation(path: "/xdg/tokenrelay/config.yaml", isExplicit: false))
        #expect(
            ConfigLoader.locate(path: nil, environment: ["HOME": "/h"])
                == ConfigLocation(path: "/h/.config/tokenrelay/config.yaml", isExplicit: false))
    }

    @Test func resolveSecretsTurnsMissingSecretsIntoErrors() async {
        let files = InMemoryFileSystem(["/c.yaml": bearerConfig("{ env: TOKEN }")])
        let (lenient, _) = await runCheckConfig(["--config", "/c.yaml"], files: files)
        #expect(lenient == 0)
        let (strict, output) = await runCheckConfig(["--config", "/c.yaml", "--resolve-secrets"], files: files)
        #expect(strict == 1)
        #expect(output.standardError.contains("environment variable TOKEN is not set"))
        let (resolved, _) = await runCheckConfig(
            ["--config", "/c.yaml", "--resolve-secrets"], environment: ["TOKEN": "abcdefgh"], files: files)
        #expect(resolved == 0)
    }

    @Test func exampleConfigPassesCheckConfig() async {
        let path = repositoryRoot + "/config.example.yaml"
        let output = CapturedOutput()
        let status = await CheckConfigCommand.run(
            arguments: ["--config", path], environment: ["HOME": "/nonexistent-home"],
            standardOutput: { output.standardOutput += $0 },
            standardError: { output.standardError += $0 })
        #expect(status == 0, "\(output.standardError)")
        #expect(!output.standardError.contains("error:"))
    }
}
