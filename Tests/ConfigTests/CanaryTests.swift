import Foundation
import TestSupport
import Testing

@testable import TokenRelayConfig

/// A config holding known secrets in every kind of source, with mistakes elsewhere: no output of
/// check-config, in any mode, may contain any of the secrets.
@Suite struct CanaryTests {
    @Test func settingsDescriptionsHoldNoSecrets() async throws {
        let secret = "canary-describe-\(UUID().uuidString.prefix(8))"
        let yaml = profileConfig(
            "type: client_credentials\ntoken_url: https://a.example.com/t\nclient_id: c\nclient_secret: \(secret)")
        let result = await decodeConfig(yaml)
        let settings = try #require(result.settings)
        let rendered = [
            "\(settings)", String(reflecting: settings), "\(settings.environments)",
            "\(settings.environments[0].profiles)",
            "\(settings.environments[0].profiles[0].kind)",
            String(reflecting: settings.environments[0].profiles[0].kind),
            result.diagnostics.map(\.rendered).joined(),
        ]
        for text in rendered { #expect(!text.contains(secret), "\(text)") }
    }
}

@Suite struct SecretReflectionTests {
    @Test func dumpShowsNoInlineValue() async throws {
        let secret = "canary-dump-\(UUID().uuidString.prefix(8))"
        let source = try bearerSource(await decodeConfig(bearerConfig(secret)))
        var dumped = ""
        dump(source, to: &dumped)
        #expect(!dumped.contains(secret))
        #expect(dumped.contains("inline"))
    }
}
