import Foundation
import Testing

@testable import TokenRelayAuth
@testable import TokenRelayConfig
@testable import TokenRelayServer

@Suite struct CurrentRuntimeTests {
    static func settings(_ environments: [String]) async throws -> Settings {
        var text = "version: 1\nstore: { type: memory }\nenvironments:\n"
        for name in environments {
            text += """
                  \(name):
                    base_url: http://127.0.0.1:9/\(name)
                    profiles:
                      service:
                        type: client_credentials
                        token_url: http://127.0.0.1:9/token
                        client_id: svc-\(name)
                        client_secret: { env: SECRET }

                """
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("runtime-\(UUID().uuidString).yaml")
        try text.write(to: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: path) }
        let result = await ConfigLoader().load(
            path: path.path, environment: ["SECRET": "svc-secret-1234"], mode: .serve)
        return try #require(result.settings, "\(result.diagnostics.map(\.rendered))")
    }

    @Test func aReloadThatRemovesAnEnvironmentForgetsItsTokenTraffic() async throws {
        let before = try await Self.settings(["kept", "gone"])
        let first = try await RelayRuntime.make(settings: before, environmentOverride: nil)
        let manager = first.manager
        #expect(manager.trafficEnvironments == ["kept", "gone"])
        let runtimes = CurrentRuntime(first)
        let after = try await Self.settings(["kept"])
        let second = try await RelayRuntime.make(
            settings: after, environmentOverride: nil, reusing: (first, SettingsDiff(old: before, new: after)))
        runtimes.replace(with: second)
        // The retired runtime is cleaned up once its last call ended (here: at once, off this task).
        let deadline = ContinuousClock.now + .seconds(60)
        while manager.trafficEnvironments != ["kept"], ContinuousClock.now < deadline { await Task.yield() }
        #expect(manager.trafficEnvironments == ["kept"])
        #expect(await manager.sessionKeys.map(\.environment) == ["kept"])
        await runtimes.close()
    }
}

/// A token request is bounded by its environment's `timeout` (it was a fixed 30 s: with a
/// longer `timeout`, a slow token endpoint could still abandon a refresh it had been sent).
@Suite struct TokenRequestBoundTests {
    @Test func theAcquisitionTimeoutIsTheEnvironmentsTimeout() async throws {
        var settings = try await CurrentRuntimeTests.settings(["slow", "default"])
        settings.environments[0].timeout = .seconds(300)
        for (environment, expected) in zip(settings.environments, [Duration.seconds(300), .seconds(30)]) {
            let profile = try #require(environment.profiles.first)
            let configuration = try #require(ProfileRuntime.oauthConfiguration(profile, in: environment))
            #expect(configuration.acquisitionTimeout == expected, "\(environment.name)")
        }
    }
}
