import Testing

@testable import TokenRelayConfig

@Suite struct InterpolationTests {
    @Test(
        arguments: [
            ("plain", [:], "plain"),
            ("${A}", ["A": "1"], "1"),
            ("x${A}y${B}z", ["A": "1", "B": "2"], "x1y2z"),
            ("${A:-fallback}", [:], "fallback"),
            ("${A:-fallback}", ["A": ""], "fallback"),
            ("${A:-fallback}", ["A": "set"], "set"),
            ("${A:-}", [:], ""),
            ("$$", [:], "$"),
            ("$${A}", ["A": "1"], "${A}"),
            ("cost: $5", [:], "cost: $5"),
            ("trailing $", [:], "trailing $"),
            ("${A:-a:-b}", [:], "a:-b"),
            ("${_a1}", ["_a1": "v"], "v"), ("${Z_9}", ["Z_9": "v"], "v"),
        ] as [(String, [String: String], String)])
    func referencesAreReplaced(text: String, environment: [String: String], expected: String) throws {
        let outcome = try Interpolation.apply(text, environment: environment)
        #expect(outcome.text == expected)
        #expect(outcome.missing.isEmpty)
    }

    @Test func unsetVariablesWithoutDefaultAreListed() throws {
        let outcome = try Interpolation.apply("${A}-${B}-${C:-c}", environment: ["B": ""])
        #expect(outcome.missing == ["A", "B"])
        #expect(outcome.text == "--c")
    }

    @Test(arguments: ["${A", "${}", "${1A}", "${A B}", "${A:b}", "${\u{00C9}}", "${A\u{0301}}", "${A-B}", "${[}"])
    func malformedReferencesFail(text: String) {
        #expect(throws: Interpolation.Failure.self) { try Interpolation.apply(text, environment: [:]) }
    }

    @Test func unsetVariableIsAnErrorWhenServingNamingItAndItsPlace() async throws {
        let result = await decodeConfig(environmentConfig("timeout: ${TIMEOUT}"))
        let error = try #require(result.errors.first)
        #expect(error.message.contains("TIMEOUT"))
        #expect(error.rendered.hasPrefix("\(testConfigPath):5:14: "))
        #expect(result.settings == nil)
    }

    @Test func unsetVariableIsAWarningWhenCheckingWithoutSecrets() async throws {
        let result = await decodeConfig(
            "version: 1\nenvironments:\n  e:\n    base_url: ${BASE_URL}\n    timeout: ${T}\n",
            mode: .check(resolveSecrets: false))
        #expect(!result.hasErrors, "\(result.diagnostics)")
        #expect(result.warnings.map(\.line) == [4, 5])
        #expect(result.warnings.first?.message.contains("BASE_URL") == true)
    }

    @Test func unsetVariableIsAnErrorWhenCheckingWithSecrets() async {
        let result = await decodeConfig(environmentConfig("timeout: ${T}"), mode: .check(resolveSecrets: true))
        #expect(result.errors.map(\.line) == [5])
    }

    @Test func interpolationHappensBeforeTyping() async throws {
        let yaml = """
            version: ${VERSION:-1}
            server:
              max_concurrent_requests: ${N}
              max_message_bytes: ${SIZE:-1MiB}
            environments:
              e:
                base_url: https://${HOST}/api
                timeout: ${T:-5s}
                headers: { X-Price: "$$5" }
            """
        let result = await decodeConfig(yaml, environment: ["N": "12", "HOST": "h.example.com"])
        let settings = try #require(result.settings, "\(result.diagnostics)")
        #expect(settings.server.maxConcurrentRequests == 12)
        #expect(settings.server.maxMessageBytes == 1 << 20)
        #expect(settings.environments.first?.baseURL == "https://h.example.com/api")
        #expect(settings.environments.first?.timeout == .seconds(5))
        #expect(settings.environments.first?.headers.first?.value == "$5")
    }

    @Test func interpolatedValueIsStillTypeChecked() async {
        let result = await decodeConfig(environmentConfig("timeout: ${T}"), environment: ["T": "soon"])
        #expect(result.errors.first?.message.contains("'${T}'") == true)
    }

    @Test func malformedReferenceIsAnError() async {
        let result = await decodeConfig(environmentConfig("timeout: ${T"))
        #expect(result.errors.first?.message.contains("unterminated") == true)
    }

    @Test func homeIsExpandedInPaths() async {
        let result = await decodeConfig(
            "version: 1\nstore: { type: sqlite, path: ~/t.db }\n", mode: .check(resolveSecrets: false))
        #expect(result.settings?.store.path == "/home/u/t.db")
    }
}
