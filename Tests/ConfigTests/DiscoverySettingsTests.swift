import TestSupport
import Testing

@testable import TokenRelayConfig

/// `discover: true` and its options (SPEC §9).
@Suite struct DiscoverySettingsTests {
    private func oauthClient(_ result: ConfigLoadResult) -> OAuthClientSettings? {
        switch result.settings?.environments.first?.profiles.first?.kind {
        case .authorizationCode(let client, _), .clientCredentials(let client): client
        default: nil
        }
    }

    @Test func discoveredAuthorizationCodeNeedsNoIssuerNorClientID() async throws {
        let result = await decodeConfig(profileConfig("type: authorization_code\ndiscover: true"))
        #expect(result.errors.isEmpty, "\(result.diagnostics.map(\.rendered))")
        let client = try #require(oauthClient(result))
        #expect(client.clientID.isEmpty)
        #expect(client.discovery == DiscoverySettings())
    }

    @Test func discoveredClientCredentialsStillNeedsAClientID() async {
        let result = await decodeConfig(profileConfig("type: client_credentials\ndiscover: true"))
        #expect(result.errors.contains { $0.message.contains("client_id") })
    }

    /// A discovered profile's issuer comes from the resource: an assertion addressed to it is
    /// valid (SEP-1046 servers want it). Before: "'client_assertion_audience: issuer' needs an
    /// 'issuer'".
    @Test func aDiscoveredProfileMayAddressItsAssertionToTheIssuer() async {
        let result = await decodeConfig(
            profileConfig(
                "type: client_credentials\ndiscover: true\nclient_id: svc\nclient_auth: private_key_jwt\n"
                    + "client_key: { env: KEY }\nclient_assertion_audience: issuer"))
        #expect(result.errors.isEmpty, "\(result.diagnostics.map(\.rendered))")
        let plain = await decodeConfig(
            profileConfig(
                "type: client_credentials\ntoken_url: http://127.0.0.1:1/t\nclient_id: svc\n"
                    + "client_auth: private_key_jwt\nclient_key: { env: KEY }\nclient_assertion_audience: issuer"))
        #expect(plain.errors.contains { $0.message.contains("needs an 'issuer'") })
    }

    @Test func withoutDiscoverAnIssuerOrTokenURLIsRequired() async {
        let result = await decodeConfig(profileConfig("type: authorization_code\nclient_id: x"))
        #expect(result.errors.contains { $0.message.contains("discover: true") })
    }

    @Test func optionsAreRead() async throws {
        let result = await decodeConfig(
            profileConfig(
                "type: client_credentials\ndiscover: true\nclient_id: svc\nresource_indicator: false\nstep_up: true"))
        #expect(result.errors.isEmpty, "\(result.diagnostics.map(\.rendered))")
        let client = try #require(oauthClient(result))
        #expect(client.discovery == DiscoverySettings(resourceIndicator: false, stepUp: true))
    }

    @Test func resourceIndicatorFalseDropsAConfiguredResource() async throws {
        let result = await decodeConfig(
            profileConfig(
                "type: client_credentials\ntoken_url: https://a.example/t\nclient_id: svc\nresource: https://r.example\n"
                    + "resource_indicator: false"))
        #expect(result.errors.isEmpty, "\(result.diagnostics.map(\.rendered))")
        #expect(try #require(oauthClient(result)).resource.isEmpty)
    }

    @Test func stepUpWithoutDiscoverIsAnError() async {
        let result = await decodeConfig(
            profileConfig("type: client_credentials\ntoken_url: https://a.example/t\nclient_id: svc\nstep_up: true"))
        #expect(result.errors.contains { $0.message.contains("step_up' needs 'discover: true'") })
    }
}
