import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP

/// The resource a profile's requests go to: the environment's base URL and the transport its
/// metadata is fetched through.
struct ResourceTarget: Sendable {
    let url: String
    let transport: any HTTPTransport
}

extension ProfileRuntime {
    /// The runtime of a `discover: true` OAuth profile (SPEC §9); `nil` for any other profile.
    static func discoveredRuntime(
        _ settings: ProfileSettings, environment: EnvironmentSettings, manager: TokenManager, resource: ResourceTarget
    ) -> ProfileRuntime? {
        let client: OAuthClientSettings
        switch settings.kind {
        case .clientCredentials(let value), .refreshToken(let value, _), .authorizationCode(let value, _),
            .deviceCode(let value, _), .jwtBearer(let value, _):
            client = value
        case .apiKey, .basic, .bearer, .tokenExchange:
            return nil
        }
        guard let options = client.discovery, let configuration = oauthConfiguration(settings, in: environment) else {
            return nil
        }
        // The whole configuration: a discovered profile keeps every key it sets (SPEC §9.4).
        let template = DiscoveryTemplate(
            resourceURL: resource.url, configuration: configuration, resourceIndicator: options.resourceIndicator,
            stepUp: options.stepUp, clientMetadataURL: options.clientMetadataURL)
        let authorization = ResourceAuthorization(
            manager: manager, transport: resource.transport, environment: environment.name,
            profile: settings.name, template: template)
        return ProfileRuntime(
            name: settings.name, typeName: settings.typeName, exposeToken: settings.exposeToken,
            credentials: DiscoveredCredentialSource(authorization: authorization), session: nil,
            credentialHeader: "authorization", unavailableReason: nil, secretQueryParameters: [], secretHeaders: [],
            discovery: authorization)
    }
}
