import Foundation
import TestSupport
import Testing
import TokenRelay

/// ``TokenRelayClient`` against the loopback recording server: the public entry point alone.
@Suite struct TokenRelayClientTests {
    static let key = "canary-library-key-5d1e"

    /// The recording server and a configuration built in code for it.
    static func setUp() async throws -> (FixtureServer, TokenRelayConfiguration) {
        let log = TestScratch.path("tokenrelay-lib") + ".log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let server = try await FixtureServer(role: "recording", [log], ports: 3)
        let configuration = TokenRelayConfiguration(environments: [
            .init(
                "local", baseURL: "http://127.0.0.1:\(server.ports[0])",
                profiles: [
                    .init("key", .apiKey(header: "X-API-Key", value: .value(key))),
                    .init("exposed", .bearer(token: .value("bearer-\(key)")), exposeToken: true),
                ])
        ])
        return (server, configuration)
    }

    @Test func aClientBuiltInCodeMakesAnAuthenticatedRequest() async throws {
        let (server, configuration) = try await Self.setUp()
        defer { server.stop() }
        let client = try await TokenRelayClient.make(configuration)
        let response = try await client.request("GET", "/echo", query: ["q": "1"])
        #expect(response.status == 200)
        #expect(response.text.contains(Self.key), "the API key reached the server: \(response.text)")
        let missing = try await client.request("GET", "/status/404")
        #expect(missing.status == 404, "any status is a response")
        await client.close()
    }

    @Test func tokenIsHandedOutOnlyForAProfileThatExposesIt() async throws {
        let (server, configuration) = try await Self.setUp()
        defer { server.stop() }
        let client = try await TokenRelayClient.make(configuration)
        let token = try await client.token(profile: "exposed")
        #expect(token.value == "bearer-\(Self.key)")
        #expect(!"\(token)".contains(Self.key), "the description is redacted")
        await #expect(throws: TokenRelayError.self) { try await client.token(profile: "key") }
        await client.close()
    }

    @Test func aBadConfigurationOrAnUnknownProfileIsAClearError() async throws {
        do {
            _ = try await TokenRelayClient.load(yaml: "version: 1\nenvironments: {local: {base_ulr: x}}")
            Issue.record("a bad configuration was accepted")
        } catch {
            #expect(error.kind == "config")
            #expect(error.message.contains("did you mean 'base_url'"), "\(error.message)")
        }
        let (server, configuration) = try await Self.setUp()
        defer { server.stop() }
        let client = try await TokenRelayClient.make(configuration)
        do {
            _ = try await client.request("GET", "/echo", profile: "kye")
            Issue.record("an unknown profile was accepted")
        } catch {
            #expect(error.kind == "unknown_profile")
            #expect(error.message.contains("did you mean 'key'?"), "\(error.message)")
        }
        await client.close()
    }
}
