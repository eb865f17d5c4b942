import Foundation
import Testing

@testable import TokenRelayAuth
@testable import TokenRelayConfig
@testable import TokenRelayServer

/// A `discover: true` profile keeps every key it sets (SPEC §9.4).
@Suite struct DiscoveredProfileTests {
    /// Before: the discovery template had no place for `client_key`, so a discovered
    /// `private_key_jwt` profile failed with "private_key_jwt needs a client_key" though
    /// `check-config` said it was valid.
    @Test func aDiscoveredPrivateKeyJWTProfileKeepsItsClientKey() async throws {
        let text = """
            version: 1
            store: { type: memory }
            environments:
              mcp:
                base_url: http://127.0.0.1:9/mcp
                profiles:
                  service:
                    type: client_credentials
                    discover: true
                    client_id: svc
                    client_auth: private_key_jwt
                    client_key: { env: CLIENT_KEY }
                    client_key_id: k1
                    scopes: [mcp]

            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("discovered-\(UUID().uuidString).yaml")
        try text.write(to: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: path) }
        let result = await ConfigLoader().load(path: path.path, environment: ["CLIENT_KEY": "unused"], mode: .serve)
        let settings = try #require(result.settings, "\(result.diagnostics.map(\.rendered))")
        let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: nil)
        let environment = try runtime.environment(nil)
        let profile = try #require(try runtime.profile(nil, in: environment))
        let authorization = try #require(profile.discovery)
        let template = await authorization.template
        #expect(template.configuration.clientAuth == .privateKeyJWT)
        #expect(template.configuration.clientKey?.keyID == "k1")
        #expect(template.clientID == "svc")
        #expect(template.scopes == ["mcp"])
        await runtime.close()
    }
}
