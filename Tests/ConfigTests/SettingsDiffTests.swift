import Testing

@testable import TokenRelayConfig

/// What a reload counts as added, changed and removed (SPEC §5.7): settings compared as written.
@Suite struct SettingsDiffTests {
    static let base = """
        version: 1
        environments:
          api:
            base_url: https://api.example.com
            profiles:
              service:
                type: client_credentials
                token_url: https://auth.example.com/token
                client_id: svc
                client_secret: { env: SECRET }
              key:
                type: api_key
                header: X-Key
                value: { file: /keys/k }
          other:
            base_url: https://other.example.com
            profiles:
              basic:
                type: basic
                username: u
                password: { env: PASSWORD }
        """

    static func settings(_ yaml: String, environment: [String: String] = [:]) async throws -> Settings {
        let result = await decodeConfig(yaml, environment: ["HOME": "/home/u"].merging(environment) { $1 })
        return try #require(result.settings, "\(result.diagnostics)")
    }

    static func diff(_ old: String, _ new: String, newEnvironment: [String: String] = [:]) async throws
        -> SettingsDiff
    {
        SettingsDiff(old: try await settings(old), new: try await settings(new, environment: newEnvironment))
    }

    static func entry(_ environment: String, _ profile: String?) -> SettingsDiff.Entry {
        .init(environment: environment, profile: profile)
    }

    @Test func identicalSettingsChangeNothing() async throws {
        let diff = try await Self.diff(Self.base, Self.base)
        #expect(diff.isEmpty)
        #expect(diff.keeps(environment: "api", profile: "service"))
    }

    @Test func secretSourcesAreComparedAsWrittenNotAsResolved() async throws {
        // The same {env: SECRET} with another value behind it is unchanged...
        let same = try await Self.diff(Self.base, Self.base, newEnvironment: ["SECRET": "another value"])
        #expect(same.isEmpty)
        // ...and another variable is a change, even with the same value behind it.
        let renamed = Self.base.replacingOccurrences(of: "{ env: SECRET }", with: "{ env: SECRET2 }")
        let changed = try await Self.diff(Self.base, renamed)
        #expect(changed.changed == [Self.entry("api", "service")])
        #expect(changed.added.isEmpty && changed.removed.isEmpty)
        #expect(!changed.keeps(environment: "api", profile: "service"))
        #expect(changed.keeps(environment: "api", profile: "key"))
    }

    @Test func aTokenExchangeChangesWhenItsSubjectProfileDoes() async throws {
        let lines = [
            "      exchanged:", "        type: token_exchange", "        token_url: https://auth.example.com/token",
            "        client_id: ex", "        subject: { profile: service }", "      key:",
        ]
        let exchange = Self.base.replacingOccurrences(of: "      key:", with: lines.joined(separator: "\n"))
        let renamed = exchange.replacingOccurrences(of: "client_id: svc", with: "client_id: svc2")
        let diff = try await Self.diff(exchange, renamed)
        #expect(diff.changed == [Self.entry("api", "exchanged"), Self.entry("api", "service")], "\(diff.changed)")
        #expect(!diff.keeps(environment: "api", profile: "exchanged"))
        #expect(diff.keeps(environment: "api", profile: "key"))
    }

    @Test func movingAProfileInTheFileIsNoChange() async throws {
        let moved = Self.base.replacingOccurrences(of: "version: 1\n", with: "version: 1\n\n\n# comment\n")
        #expect(try await Self.diff(Self.base, moved).isEmpty)
    }

    @Test func addedAndRemovedProfilesAndEnvironmentsAreListedPerPair() async throws {
        let new = """
            version: 1
            environments:
              api:
                base_url: https://api.example.com
                profiles:
                  service:
                    type: client_credentials
                    token_url: https://auth.example.com/token
                    client_id: svc
                    client_secret: { env: SECRET }
                  token:
                    type: bearer
                    token: { env: TOKEN }
              third:
                base_url: https://third.example.com
            """
        let diff = try await Self.diff(Self.base, new)
        #expect(diff.added == [Self.entry("api", "token"), Self.entry("third", nil)])
        #expect(diff.removed == [Self.entry("api", "key"), Self.entry("other", "basic")])
        #expect(diff.changed.isEmpty)
        #expect(diff.replacedEnvironments == ["other"])
        #expect(diff.keeps(environment: "api", profile: "service"))
        #expect(!diff.keeps(environment: "other", profile: "basic"))
    }

    @Test func aChangedEnvironmentChangesEachOfItsProfiles() async throws {
        let new = Self.base.replacingOccurrences(
            of: "base_url: https://api.example.com", with: "base_url: https://api.example.com\n    timeout: 5s")
        let diff = try await Self.diff(Self.base, new)
        #expect(diff.changed == [Self.entry("api", "key"), Self.entry("api", "service")])
        #expect(diff.replacedEnvironments == ["api"])
        #expect(!diff.keeps(environment: "api", profile: nil), "its plain (auth: false) subscriptions end too")
        #expect(diff.keeps(environment: "other", profile: "basic"))
    }

    @Test(arguments: [
        ("client_id: svc", "client_id: svc2"),
        ("header: X-Key", "query: key"),
        ("username: u", "username: v"),
        ("{ file: /keys/k }", "{ file: /keys/other }"),
    ])
    func aChangedProfileSettingIsAChange(old: String, new: String) async throws {
        let diff = try await Self.diff(Self.base, Self.base.replacingOccurrences(of: old, with: new))
        #expect(diff.changed.count == 1, "\(diff)")
        #expect(diff.added.isEmpty && diff.removed.isEmpty)
    }

    @Test func aChangedStoreOrServerSectionNeedsARestart() async throws {
        let store = Self.base.replacingOccurrences(of: "version: 1\n", with: "version: 1\nstore: { type: memory }\n")
        #expect(try await Self.diff(Self.base, store).restartSections == ["store"])
        let server = Self.base.replacingOccurrences(
            of: "version: 1\n", with: "version: 1\nserver: { max_concurrent_requests: 8 }\n")
        #expect(try await Self.diff(Self.base, server).restartSections == ["server"])
        #expect(try await Self.diff(Self.base, Self.base).restartSections.isEmpty)
    }

    @Test func aChangedSharedTierNeedsARestart() async throws {
        func shared(_ settings: String) -> String {
            Self.base.replacingOccurrences(
                of: "version: 1\n",
                with: "version: 1\nstore: { encryption_key: { env: K }, shared: { type: postgres, \(settings) } }\n")
        }
        let one = shared("url: \"postgresql://tr@127.0.0.1/a\"")
        #expect(try await Self.diff(Self.base, one).restartSections == ["store"])
        #expect(try await Self.diff(one, one).restartSections.isEmpty)
        for other in [
            shared("url: \"postgresql://tr@127.0.0.1/b\""), shared("url: \"postgresql://tr@127.0.0.1/a\", timeout: 5s"),
            shared("url: \"postgresql://tr@127.0.0.1/a\", schema: other"),
            shared("url: \"postgresql://tr@127.0.0.1/a\", password: { env: P }"),
        ] {
            #expect(try await Self.diff(one, other).restartSections == ["store"], "\(other)")
        }
    }

    @Test func inlineSecretsCompareByTheirValue() async throws {
        let old = Self.base.replacingOccurrences(of: "{ env: PASSWORD }", with: "pass-one")
        let new = Self.base.replacingOccurrences(of: "{ env: PASSWORD }", with: "pass-two")
        #expect(try await Self.diff(old, old).isEmpty)
        #expect(try await Self.diff(old, new).changed == [Self.entry("other", "basic")])
    }
}
