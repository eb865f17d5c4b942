import Testing
import TokenRelayConfig
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// Which sessions `token-invalidate` and `logout` select (issue 12: an environment without a
/// profile means every profile of it, always, whatever its `default_profile`).
@Suite struct TokenMethodsSelectionTests {
    static let yaml = """
        version: 1
        store: { type: memory }
        default_environment: one
        environments:
          one:
            base_url: http://127.0.0.1:9
            profiles:
              only: { type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: a }
          several:
            base_url: http://127.0.0.1:9
            profiles:
              a: { type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: a }
              b: { type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: b }
          defaulted:
            base_url: http://127.0.0.1:9
            default_profile: b
            profiles:
              a: { type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: a }
              b: { type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: b }
        """

    static func withMethods(_ body: (TokenMethods) async throws -> Void) async throws {
        let loaded = await ConfigLoader().decode(yaml: yaml, environment: [:], mode: .serve)
        let settings = try #require(loaded.settings, "\(loaded.diagnostics)")
        let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: nil)
        do {
            try await body(TokenMethods(runtime: runtime, subscriptionCount: { 0 }))
        } catch {
            await runtime.close()
            throw error
        }
        await runtime.close()
    }

    static func select(_ methods: TokenMethods, _ params: JSONValue?) throws -> (
        environment: String?, profile: String?
    ) {
        try methods.resolve(SessionSelection(decoding: params))
    }

    @Test func anEnvironmentWithOneProfileSelectsEveryProfileOfIt() async throws {
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, ["environment": "one"])
            #expect(selected.environment == "one" && selected.profile == nil)
        }
    }

    @Test func anEnvironmentWithSeveralProfilesAndNoDefaultSelectsEveryProfileOfIt() async throws {
        // This answered unknown_profile before.
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, ["environment": "several"])
            #expect(selected.environment == "several" && selected.profile == nil)
        }
    }

    @Test func anEnvironmentWithADefaultProfileStillSelectsEveryProfileOfIt() async throws {
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, ["environment": "defaulted"])
            #expect(selected.environment == "defaulted" && selected.profile == nil)
        }
    }

    @Test func anEnvironmentAndAProfileSelectThatProfile() async throws {
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, ["environment": "several", "profile": "b"])
            #expect(selected.environment == "several" && selected.profile == "b")
        }
    }

    @Test func nothingNamedSelectsTheDefaultEnvironmentsDefaultProfile() async throws {
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, nil)
            #expect(selected.environment == "one" && selected.profile == "only")
        }
    }

    @Test func allSelectsEverySession() async throws {
        try await Self.withMethods { methods in
            let selected = try Self.select(methods, ["all": true])
            #expect(selected.environment == nil && selected.profile == nil)
        }
    }

    @Test func anUnknownEnvironmentIsUnknownEnvironment() async throws {
        try await Self.withMethods { methods in
            let error = #expect(throws: RPCError.self) { try Self.select(methods, ["environment": "nope"]) }
            #expect(error?.code == .unknownEnvironment)
        }
    }

    @Test func anUnknownProfileOfAKnownEnvironmentIsUnknownProfile() async throws {
        try await Self.withMethods { methods in
            let error = #expect(throws: RPCError.self) {
                try Self.select(methods, ["environment": "several", "profile": "c"])
            }
            #expect(error?.code == .unknownProfile)
        }
    }

    @Test func invalidateAndLogoutAnswerForAnEnvironmentWithSeveralProfiles() async throws {
        // Both went through the same selection: before the fix they failed unknown_profile here.
        try await Self.withMethods { methods in
            let invalidated = try await methods.invalidate(SessionSelection(decoding: ["environment": "several"]))
            #expect(invalidated == TokenInvalidateMethod.Result(invalidated: 0))
            let loggedOut = try await methods.logout(SessionSelection(decoding: ["environment": "several"]))
            #expect(loggedOut == LogoutMethod.Result(loggedOut: 2))
        }
    }
}
