import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP

/// One configured environment: its transport, origin policy, headers and profiles. One object
/// per environment and runtime, shared by every request to it (a request's frames hold a
/// reference, not a copy of its clients and profiles).
package final class EnvironmentRuntime: Sendable {
    let settings: EnvironmentSettings
    let origins: OriginPolicy
    let headers: HTTPHeaders
    let transport: LazyTransport
    let profiles: [String: ProfileRuntime]
    /// Adds the environment's headers for its origins.
    let environmentHeaders: EnvironmentHeadersMiddleware
    /// Logs every exchange, with the profiles' secret header and query names masked.
    let logging: LoggingMiddleware
    /// Sends without credentials (environment headers still go to allowed origins).
    let plainClient: HTTPClient
    /// Sends with each profile's credentials.
    let clients: [String: HTTPClient]
    /// The URLs `request` parsed last in this environment.
    let recentURLs = ParsedURLCache()

    init(
        settings: EnvironmentSettings, origins: OriginPolicy, headers: HTTPHeaders, transport: LazyTransport,
        profiles: [String: ProfileRuntime], environmentHeaders: EnvironmentHeadersMiddleware,
        logging: LoggingMiddleware, plainClient: HTTPClient, clients: [String: HTTPClient]
    ) {
        self.settings = settings
        self.origins = origins
        self.headers = headers
        self.transport = transport
        self.profiles = profiles
        self.environmentHeaders = environmentHeaders
        self.logging = logging
        self.plainClient = plainClient
        self.clients = clients
    }

    package var name: String { settings.name }

    /// The profile to use when the caller names none: `default_profile`, else the only profile.
    var defaultProfileName: String? {
        if let name = settings.defaultProfile { return name }
        return settings.profiles.count == 1 ? settings.profiles.first?.name : nil
    }

    /// Builds the environment's runtime; profiles in `kept` (unchanged by a reload) are used as
    /// they are, the others are made (registering their sessions with `manager`).
    static func make(
        _ settings: EnvironmentSettings, manager: TokenManager, transport: LazyTransport,
        keeping kept: [String: ProfileRuntime] = [:]
    ) async throws -> EnvironmentRuntime {
        let origins = OriginPolicy(baseURL: settings.baseURL, allowed: settings.allowedOrigins)
        let headers = HTTPHeaders(settings.headers)
        var profiles: [String: ProfileRuntime] = [:]
        var clients: [String: HTTPClient] = [:]
        var secretQuery: [String] = []
        var secretHeaders: [String] = []
        for profileSettings in settings.profiles {
            let profile: ProfileRuntime
            if let unchanged = kept[profileSettings.name] {
                profile = unchanged
            } else {
                profile = try await ProfileRuntime.make(
                    environment: settings, settings: profileSettings, manager: manager,
                    resource: ResourceTarget(url: settings.baseURL, transport: transport))
            }
            profiles[profile.name] = profile
            secretQuery += profile.secretQueryParameters
            secretHeaders += profile.secretHeaders
        }
        let logging = LoggingMiddleware(secretQueryParameters: secretQuery, secretHeaders: secretHeaders)
        let environmentHeaders = EnvironmentHeadersMiddleware(headers: headers, origins: origins)
        for (name, profile) in profiles {
            guard let credentials = profile.credentials else { continue }
            clients[name] = makeClient(
                transport: transport, environmentHeaders: environmentHeaders, logging: logging,
                credentials: CredentialsMiddleware(source: credentials, origins: origins, discovery: profile.discovery))
        }
        return EnvironmentRuntime(
            settings: settings, origins: origins, headers: headers, transport: transport, profiles: profiles,
            environmentHeaders: environmentHeaders, logging: logging,
            plainClient: makeClient(
                transport: transport, environmentHeaders: environmentHeaders, logging: logging, credentials: nil),
            clients: clients)
    }

    /// The one middleware stack of the environment, for `request`, `subscribe` and `mcp-proxy` alike: environment
    /// headers and credentials (each only for the environment's origins; the credentials middleware also acts on a
    /// discovered profile's challenges, SPEC §9.1, §9.2), then logging of every attempt the transport makes.
    private static func makeClient(
        transport: LazyTransport, environmentHeaders: EnvironmentHeadersMiddleware, logging: LoggingMiddleware,
        credentials: CredentialsMiddleware?
    ) -> HTTPClient {
        HTTPClient(
            transport: transport, middlewares: [environmentHeaders] + (credentials.map { [$0] } ?? []) + [logging])
    }

    /// The client that sends with `profile`'s credentials (`nil`: none). With `recoveryBudget` (a subscription's,
    /// shared by its reconnects) the same stack is built around that budget; without, each request has its own.
    func client(for profile: ProfileRuntime?, recoveryBudget: AuthRecoveryBudget? = nil) -> HTTPClient {
        guard let profile, let credentials = profile.credentials else { return plainClient }
        guard let recoveryBudget else { return clients[profile.name] ?? plainClient }
        return Self.makeClient(
            transport: transport, environmentHeaders: environmentHeaders, logging: logging,
            credentials: CredentialsMiddleware(
                source: credentials, origins: origins, budget: recoveryBudget, discovery: profile.discovery))
    }

    /// The client that forwards with `profile`'s credentials under the forwarding policy (`mcp-proxy`, SPEC §9.6):
    /// the same stack, where any method is sent again after a 401 and `logIn` is started when the session needs a
    /// person.
    func forwardingClient(for profile: ProfileRuntime, logIn: @escaping @Sendable () async throws -> Void)
        -> HTTPClient
    {
        guard let credentials = profile.credentials else { return plainClient }
        return Self.makeClient(
            transport: transport, environmentHeaders: environmentHeaders, logging: logging,
            credentials: CredentialsMiddleware(
                source: credentials, origins: origins, discovery: profile.discovery,
                forwarding: CredentialsMiddleware.Forwarding(logIn: logIn)))
    }
}
