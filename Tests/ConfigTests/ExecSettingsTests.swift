import Testing

@testable import TokenRelayConfig

/// The `exec:` block (SPEC §12): the child's variables and their templates, the rules, `redact`,
/// and the diagnostics of the one config decoder.
@Suite struct ExecSettingsTests {
    @Test func decoderReadsTheBlock() async throws {
        let result = await decodeConfig(
            environmentConfig(
                """
                exec:
                  env: { OPENAI_BASE_URL: "{url}/v1", OPENAI_API_KEY: "{token}", DOCKER_HOST: "unix://{socket}" }
                  allow: ["GET /repos/**", "POST /v1/**"]
                  deny: ["* /admin/**"]
                  redact: false
                """))
        let settings = try #require(result.settings, "\(result.diagnostics.map(\.rendered))")
        #expect(!result.hasErrors)
        let exec = try #require(settings.environment(named: "e")?.exec)
        #expect(exec.env.map(\.name) == ["OPENAI_BASE_URL", "OPENAI_API_KEY", "DOCKER_HOST"])
        #expect(exec.env.map(\.template) == ["{url}/v1", "{token}", "unix://{socket}"])
        #expect(exec.allow.map(\.text) == ["GET /repos/**", "POST /v1/**"])
        #expect(exec.deny.map(\.text) == ["* /admin/**"])
        #expect(!exec.redact)
    }

    @Test func anEmptyBlockServesEverythingAndRedacts() async throws {
        let result = await decodeConfig(environmentConfig("exec: {}"))
        let exec = try #require(result.settings?.environment(named: "e")?.exec)
        #expect(exec.redact && exec.env.isEmpty)
        let path = try MCPPath.normalise("/any/thing").get()
        guard case .allowed = exec.decide(method: "DELETE", path: path) else {
            Issue.record("an exec block without rules refused a request")
            return
        }
        #expect(result.settings?.environment(named: "e")?.mcp == nil)
    }

    @Test func denyWinsOverTheDefaultAndOverAllow() throws {
        let deny = try MCPRule.parse("DELETE /repos/**").get()
        let path = try MCPPath.normalise("/repos/a").get()
        #expect(ExecSettings(deny: [deny]).decide(method: "DELETE", path: path) == .denied(deny))
        let allow = try MCPRule.parse("GET /repos/**").get()
        #expect(ExecSettings(allow: [allow]).decide(method: "POST", path: path) == .unlisted)
        #expect(ExecSettings(allow: [allow]).decide(method: "GET", path: path) == .allowed(allow))
    }

    @Test func templatesExpandTheirWordsOnly() {
        let values = ["url": "http://127.0.0.1:9/e", "host": "127.0.0.1:9", "token": "ph", "socket": ""]
        #expect(ExecSettings.expand("{url}/v1", values: values) == "http://127.0.0.1:9/e/v1")
        #expect(ExecSettings.expand("Bearer {token} {other} {", values: values) == "Bearer ph {other} {")
        #expect(ExecSettings.expand("{host}{socket}", values: values) == "127.0.0.1:9")
    }

    @Test func diagnosticsPointAtTheMistake() async {
        let result = await decodeConfig(
            environmentConfig(
                """
                exec:
                  env:
                    GOOD: "{url}"
                    TOKENRELAY_TOKEN: "{token}"
                    1BAD: "{url}"
                    ODD: "{password}"
                  allow: ["GET nope"]
                  redact: maybe
                  bogus: 1
                """), mode: .check(resolveSecrets: false))
        func find(_ fragment: String) -> ConfigDiagnostic? {
            result.diagnostics.first { $0.message.contains(fragment) }
        }
        #expect(find("sets TOKENRELAY_TOKEN itself")?.line == 8)
        #expect(find("names the variable '1BAD'")?.line == 9)
        #expect(find("{password}")?.line == 10)
        #expect(find("must start with '/'")?.line == 11)
        #expect(find("must be a boolean")?.line == 12)
        #expect(find("unknown key 'bogus'")?.severity == .error)
        #expect(result.settings?.environment(named: "e")?.exec?.env.map(\.name) == nil || result.hasErrors)
    }
}
