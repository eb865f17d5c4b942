import TestSupport
import Testing

@testable import TokenRelayConfig

/// `git_username`: the username `tokenrelay token --format git` answers with.
struct GitUsernameTests {
    static let profile = "type: client_credentials\ntoken_url: https://auth.example.com/token\nclient_id: c\n"

    @Test func theDefaultIsXAccessTokenAndAProfileMaySetItsOwn() async throws {
        let plain = await decodeConfig(profileConfig(Self.profile))
        #expect(plain.errors.isEmpty)
        #expect(plain.settings?.environments.first?.profiles.first?.gitUsername == "x-access-token")
        let custom = await decodeConfig(profileConfig(Self.profile + "expose_token: true\ngit_username: oauth2"))
        #expect(custom.errors.isEmpty)
        #expect(custom.settings?.environments.first?.profiles.first?.gitUsername == "oauth2")
    }

    @Test(arguments: ["\"bot\\npassword=forged\"", "\"bot\\ttab\"", "\"\""])
    func aUsernameThatWouldBreakAGitCredentialLineIsAnError(_ value: String) async throws {
        let result = await decodeConfig(profileConfig(Self.profile + "git_username: \(value)"))
        let error = try #require(result.errors.first)
        #expect(error.line == 10)
        #expect(error.message.contains("git_username"))
    }
}
