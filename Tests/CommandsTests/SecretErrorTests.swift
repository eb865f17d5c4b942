import FoundationEssentials
import Testing
import TokenRelayConfig
import TokenRelayJSONRPC

@testable import TokenRelayCommands

/// A secret that cannot be resolved when a request needs it says so, where it is declared and
/// why, with kind `config`, whatever the profile type: not "invalid OAuth configuration" for a
/// static token.
@Suite struct SecretErrorTests {
    static func settings(profile: String) async throws -> Settings {
        let text = """
            version: 1
            store: { type: memory }
            environments:
              e:
                base_url: http://127.0.0.1:9
                profiles:
                  p:
            \(profile.split(separator: "\n").map { "          " + $0 }.joined(separator: "\n"))

            """
        let path = "/tmp/secret-error-\(UUID().uuidString).yaml"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = await ConfigLoader().load(path: path, environment: [:], mode: .serve)
        return try #require(result.settings, "\(result.diagnostics.map(\.rendered))")
    }

    @Test(arguments: [
        "type: bearer\ntoken: { env: TR_TEST_UNSET_TOKEN }",
        "type: api_key\nheader: X-Key\nvalue: { env: TR_TEST_UNSET_TOKEN }",
        "type: basic\nusername: u\npassword: { env: TR_TEST_UNSET_TOKEN }",
        "type: client_credentials\ntoken_url: http://127.0.0.1:9/t\nclient_id: c\nclient_secret: { env: TR_TEST_UNSET_TOKEN }",
    ])
    func anUnsetSecretVariableIsNamedWithKindConfig(profile: String) async throws {
        let settings = try await Self.settings(profile: profile)
        Self.expectUnsetSecretNamed(await OneShot.call(settings: settings, environment: nil, params: ["path": "/x"]))
    }

    @Test func aLogoutWhoseSeedIsUnsetSaysWhichSecretIsMissing() async throws {
        let settings = try await Self.settings(
            profile: "type: refresh_token\ntoken_url: http://127.0.0.1:9/t\nclient_id: c\nclient_auth: none\n"
                + "refresh_token: { env: TR_TEST_UNSET_TOKEN }")
        Self.expectUnsetSecretNamed(await OneShot.logout(settings: settings, environment: nil, params: ["all": true]))
    }

    /// `outcome` failed with kind `config`, saying the secret is unavailable and naming its
    /// variable, without calling it an OAuth configuration problem.
    static func expectUnsetSecretNamed<Value>(
        _ outcome: Result<Value, RPCError>, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard case .failure(let error) = outcome else {
            Issue.record("succeeded without its secret", sourceLocation: sourceLocation)
            return
        }
        #expect(error.kind == .config, sourceLocation: sourceLocation)
        #expect(error.message.hasPrefix("secret unavailable: "), "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.message.contains("TR_TEST_UNSET_TOKEN"), "\(error.message)", sourceLocation: sourceLocation)
        #expect(!error.message.contains("OAuth"), "\(error.message)", sourceLocation: sourceLocation)
    }
}
