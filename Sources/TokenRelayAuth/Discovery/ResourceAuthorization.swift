import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// What a `discover: true` profile configures (SPEC §9): the rest comes from the resource.
public struct DiscoveryTemplate: Sendable {
    /// The resource the profile's requests go to (the environment's base URL).
    public var resourceURL: String
    /// The profile's configuration as written. Discovery sets its issuer (kept when configured:
    /// it must be one of the resource's authorization servers), its client when it registers
    /// (an empty `clientID`), its scopes when none are configured, and its `resource`; every
    /// other key the profile sets (`client_key`, `client_auth`, parameters, timeouts) is kept
    /// (SPEC §9.4).
    public var configuration: OAuthClientConfiguration
    /// Whether `resource` is sent (`resource_indicator`, default true).
    public var resourceIndicator: Bool
    /// Whether a `client_credentials` profile steps up on `insufficient_scope`.
    public var stepUp: Bool
    /// A Client ID Metadata Document URL used as the client id where the server supports it.
    public var clientMetadataURL: String?

    /// Creates a template from the profile's configuration.
    public init(
        resourceURL: String, configuration: OAuthClientConfiguration, resourceIndicator: Bool = true,
        stepUp: Bool = false, clientMetadataURL: String? = nil
    ) {
        self.resourceURL = resourceURL
        self.configuration = configuration
        self.resourceIndicator = resourceIndicator
        self.stepUp = stepUp
        self.clientMetadataURL = clientMetadataURL
    }

    /// Creates a template of the keys most profiles set.
    public init(
        resourceURL: String, issuer: String? = nil, clientID: String? = nil, clientSecret: SecretProvider? = nil,
        clientAuth: ClientAuthMethod = .none, scopes: [String] = [], audience: String? = nil,
        resourceIndicator: Bool = true, stepUp: Bool = false, clientMetadataURL: String? = nil,
        expirySkew: Duration = .seconds(30), grant: Grant
    ) {
        self.init(
            resourceURL: resourceURL,
            configuration: OAuthClientConfiguration(
                issuer: issuer, clientID: clientID ?? "", clientSecret: clientSecret, clientAuth: clientAuth,
                scopes: scopes, audience: audience, expirySkew: expirySkew, grant: grant),
            resourceIndicator: resourceIndicator, stepUp: stepUp, clientMetadataURL: clientMetadataURL)
    }

    /// The configured issuer: it must be one of the resource's authorization servers.
    public var issuer: String? { configuration.issuer }
    /// The configured client id (`nil`: an interactive profile registers itself).
    public var clientID: String? { configuration.clientID.isEmpty ? nil : configuration.clientID }
    /// Configured scopes (empty: from the challenge, else the resource's metadata).
    public var scopes: [String] { configuration.scopes }
    /// The grant.
    public var grant: Grant { configuration.grant }
}

/// Resolves a `discover: true` profile into a token-manager session (SPEC §9.1–9.4): protected
/// resource metadata, the authorization server's verified metadata, scopes, registration; then
/// registers the session. The resolution is cached for the metadata's lifetime (at most an hour)
/// and done again after a refused token request.
public actor ResourceAuthorization {
    /// The longest a resolution is trusted.
    public static let maximumLifetime: TimeInterval = 3600
    /// Step-ups allowed per session per ``stepUpWindow``.
    public static let stepUpLimit = 2
    /// The step-up window.
    public static let stepUpWindow: TimeInterval = 3600

    struct Resolved {
        var key: SessionKey
        var metadataURL: String
        var validUntil: Date
        var challengeScopes: [String]?
    }

    let manager: TokenManager
    let transport: any HTTPTransport
    let environment: String
    let profile: String
    let template: DiscoveryTemplate
    let clock: any AuthClock
    private var resolved: Resolved?
    private var resolving: Task<SessionKey, any Error>?
    /// Scopes added by step-ups (the union asked for next).
    private var extraScopes: Set<String> = []
    private var stepUps: [Date] = []

    /// A resolver for profile `profile` of `environment`, fetching metadata through `transport`.
    public init(
        manager: TokenManager, transport: any HTTPTransport, environment: String, profile: String,
        template: DiscoveryTemplate, clock: any AuthClock = SystemAuthClock()
    ) {
        self.manager = manager
        self.transport = transport
        self.environment = environment
        self.profile = profile
        self.template = template
        self.clock = clock
    }

    /// The session, resolved now or earlier. `metadataHint` (a 401's `resource_metadata`) and
    /// `challengeScopes` (its `scope`) resolve again when they name another document.
    public func key(metadataHint: String? = nil, challengeScopes: [String]? = nil) async throws -> SessionKey {
        if let resolved, clock.now < resolved.validUntil,
            metadataHint == nil || metadataHint == resolved.metadataURL
        {
            return resolved.key
        }
        if let resolving { return try await resolving.value }
        let task = Placement.throwingTask {
            try await self.resolve(hint: metadataHint, challengeScopes: challengeScopes)
        }
        resolving = task
        defer { resolving = nil }
        return try await task.value
    }

    /// The session resolved last, if any (no network).
    public var currentKey: SessionKey? { resolved?.key }

    /// A token request of the session was refused: metadata is fetched again on next use, and a
    /// refused registration (`invalid_client`) is forgotten.
    public func tokenRequestRefused(_ error: AuthError) async {
        resolved?.validUntil = .distantPast
        let discovery = manager.discoveryClient(environment: environment)
        await discovery.clear()
        if error.oauthError == "invalid_client", let key = resolved?.key, let issuer = key.issuer,
            template.clientID == nil
        {
            log.info("the registration of \(environment)/\(profile) was refused; registering again")
            if let stored = try? await manager.store.loadRegistration(issuer: issuer), stored.clientID == key.clientID {
                try? await manager.store.removeRegistration(issuer: issuer)
            }
        }
    }

    /// A 403 `insufficient_scope` asked for `scopes`: the session asks for the union of held and
    /// challenged scopes from now on (SPEC §9.2), at most twice per hour. Returns the new session,
    /// or throws when stepping up is not allowed.
    public func stepUp(scopes: [String]) async throws -> SessionKey {
        // The scopes come from the resource's challenge: cleaned before any message holds them.
        let asked = scopes.isEmpty ? nil : ServerText(scopes.joined(separator: " "))
        guard template.grant.interactive != nil || template.stepUp else {
            throw AuthError.insufficientScope(.notEnabled, scope: asked)
        }
        let now = clock.now
        stepUps.removeAll { now.timeIntervalSince($0) >= Self.stepUpWindow }
        let current = Set(resolved?.key.scopes ?? [])
        let added = Set(scopes).subtracting(current)
        guard !added.isEmpty else { throw AuthError.insufficientScope(.alreadyHeld, scope: asked) }
        guard stepUps.count < Self.stepUpLimit else {
            throw AuthError.insufficientScope(
                .limitReached(count: stepUps.count, windowSeconds: Int(Self.stepUpWindow)), scope: asked)
        }
        stepUps.append(now)
        extraScopes.formUnion(current.union(added))
        resolved?.validUntil = .distantPast
        return try await key(metadataHint: resolved?.metadataURL)
    }

    private func resolve(hint: String?, challengeScopes: [String]?) async throws -> SessionKey {
        let deadline = clock.now.addingTimeInterval(30)
        let resource = try Self.canonicalResource(template.resourceURL)
        let urls = try hint.map { [$0] } ?? ProtectedResourceMetadata.wellKnownURLs(for: template.resourceURL)
        let discovery = manager.discoveryClient(environment: environment)
        let document: ProtectedResourceMetadata
        let used: String
        let lifetime: TimeInterval
        let metadata: AuthorizationServerMetadata
        if let found = try await fetchResourceMetadata(urls: urls, resource: resource, hinted: hint != nil) {
            (document, used, lifetime) = found
            let issuer: String
            if let configured = template.issuer {
                guard document.authorizationServers.contains(configured) else {
                    throw AuthError.discovery(
                        "the configured issuer is not one of the resource's authorization servers")
                }
                issuer = configured
            } else {
                issuer = document.authorizationServers[0]
            }
            metadata = try await discovery.metadata(for: issuer, deadline: deadline)
        } else {
            // An MCP 2025-03-26 server (SPEC §9.7): its origin is the authorization server and the
            // resource.
            let origin = try EndpointPolicy.check(template.resourceURL, what: "the resource URL").root
            metadata = try await discovery.legacyMetadata(origin: origin, deadline: deadline)
            if let configured = template.issuer, configured != metadata.issuer {
                throw AuthError.discovery("the configured issuer is not the server's origin's authorization server")
            }
            log.info("\(environment)/\(profile): no protected resource metadata; the origin's authorization server")
            document = ProtectedResourceMetadata(
                resource: ResourceIdentifier.canonical(origin) ?? origin, authorizationServers: [metadata.issuer],
                scopesSupported: nil)
            (used, lifetime) = ("", Self.maximumLifetime)
        }
        let issuer = metadata.issuer
        var grant = template.grant
        if case .interactive(var login) = grant, case .authorizationCode(let ports, let path) = login.flow {
            // MCP authorization: PKCE must be advertised, else the client refuses to proceed.
            guard metadata.registration.codeChallengeMethodsSupported?.contains("S256") == true else {
                throw AuthError.discovery("the authorization server does not advertise PKCE S256 support")
            }
            // A Dynamic Client Registration names its redirect URIs: fixed ports keep it valid in
            // every process. A configured client or a metadata document keeps the configured ports.
            let registersDynamically =
                template.clientID == nil
                && !(template.clientMetadataURL != nil && metadata.registration.clientIDMetadataDocumentSupported)
            if ports == [0] && registersDynamically {
                login.flow = .authorizationCode(ports: Self.stablePorts(issuer: issuer), path: path)
            }
            grant = .interactive(login)
        }
        var scopes = template.scopes
        if scopes.isEmpty { scopes = challengeScopes ?? resolved?.challengeScopes ?? document.scopesSupported ?? [] }
        scopes = Array(Set(scopes).union(extraScopes)).sorted()
        if grant.interactive != nil, metadata.registration.scopesSupported?.contains("offline_access") == true,
            !scopes.contains("offline_access")
        {
            scopes.append("offline_access")
        }
        var configuration = template.configuration
        configuration.issuer = issuer
        configuration.scopes = Array(Set(scopes)).sorted()
        configuration.resources = template.resourceIndicator ? [document.resource] : []
        configuration.grant = grant
        // A jwt-bearer grant may name no client (RFC 7523 §3.1): nothing to register.
        let anonymous = if case .jwtBearer = grant { true } else { false }
        if template.clientID == nil && !anonymous {
            guard let login = grant.interactive, case .authorizationCode(let ports, let path) = login.flow else {
                throw AuthError.configuration(
                    "profile '\(profile)' needs a client_id (only authorization_code registers)")
            }
            // Registered for every scope the resource and the server name, so that a step-up keeps
            // the client (an MCP server binds its session to the client that opened it).
            let offered = Set(scopes).union(document.scopesSupported ?? [])
                .union(metadata.registration.scopesSupported ?? [])
            let registration = try await registration(
                issuer: issuer, metadata: metadata, redirectURIs: ports.map { "http://127.0.0.1:\($0)\(path)" },
                scopes: scopes, registering: offered.sorted(), deadline: deadline)
            // The registration answer is authoritative (SPEC §9.4): a configured client_auth (or
            // key) is for configured clients only.
            configuration.clientID = registration.clientID
            configuration.clientAuth = registration.clientAuthMethod
            configuration.clientSecret = registration.clientSecret.map { .value($0) }
            configuration.clientKey = nil
            configuration.clientAuthRegistered = true
        }
        let key = try await manager.register(environment: environment, profile: profile, configuration: configuration)
        resolved = Resolved(
            key: key, metadataURL: used, validUntil: clock.now.addingTimeInterval(lifetime),
            challengeScopes: challengeScopes ?? resolved?.challengeScopes)
        log.debug("discovered \(environment)/\(profile): resource metadata and issuer verified")
        return key
    }

    /// The environment's canonical resource URI (an allowed URL).
    static func canonicalResource(_ url: String) throws(AuthError) -> String {
        try EndpointPolicy.check(url, what: "the resource URL")
        guard let canonical = ResourceIdentifier.canonical(url) else {
            throw .configuration("the resource URL is not an absolute http(s) URL")
        }
        return canonical
    }

    /// Three loopback ports derived from the issuer: the same in every process, so a registration
    /// naming them stays valid (SPEC §9.4).
    static func stablePorts(issuer: String) -> [Int] {
        var hash: UInt32 = 2_166_136_261
        for byte in issuer.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        let base = 49_152 + Int(hash % 16_000)
        return [base, base + 1, base + 2]
    }

    /// The first document found among `urls` (404s are skipped); one that fails a check ends the
    /// search (nothing it names is used). `nil` when every well-known URL answered 404 (an MCP
    /// 2025-03-26 server); a `hinted` URL (a challenge's) that gives none is an error.
    private func fetchResourceMetadata(urls: [String], resource: String, hinted: Bool) async throws
        -> (ProtectedResourceMetadata, String, TimeInterval)?
    {
        var lastStatus = 0
        var onlyNotFound = true
        let rootURL = try ProtectedResourceMetadata.rootURL(for: template.resourceURL)
        for url in urls {
            let parsed = try EndpointPolicy.check(url, what: "resource_metadata")
            var headers = HTTPHeaders()
            headers.add(name: "Accept", value: "application/json")
            let request = HTTPRequest(method: "GET", parsedURL: parsed, headers: headers, timeout: .seconds(30))
            let response = try await AuthorizationServerCall.send(
                request, to: "protected resource metadata", over: transport)
            guard response.status == 200 else {
                lastStatus = response.status
                onlyNotFound = onlyNotFound && lastStatus == 404
                continue
            }
            let document = try ProtectedResourceMetadata.parse(
                response.body, expectedResource: resource, prefixAllowed: url == rootURL)
            return (document, url, Self.lifetime(cacheControl: response.headers["Cache-Control"]))
        }
        if !hinted && onlyNotFound { return nil }
        throw AuthError.discovery("no protected resource metadata found (last answer HTTP \(lastStatus))")
    }

    /// The `Cache-Control` lifetime: `max-age`, at most an hour; `no-store`/`no-cache`: none.
    static func lifetime(cacheControl: String?) -> TimeInterval {
        guard let cacheControl else { return maximumLifetime }
        var lifetime = maximumLifetime
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { part in
                String(part.filter { $0 != " " && $0 != "\t" && $0 != "\"" }).lowercased()
            }
            guard let name = parts.first else { continue }
            if name == "no-store" || name == "no-cache" { return 0 }
            if name == "max-age", parts.count == 2, let seconds = Int(parts[1]) {
                lifetime = min(lifetime, TimeInterval(max(0, seconds)))
            }
        }
        return lifetime
    }
}

extension TokenManager {
    /// The configuration registered for `key` (tests).
    func configuration(of key: SessionKey) -> OAuthClientConfiguration? { sessions[key]?.configuration }

    /// The discovery client of `environment`'s token traffic.
    nonisolated func discoveryClient(environment: String) -> DiscoveryClient {
        environmentTraffic.withLock { $0[environment] }?.discovery ?? discovery
    }
}
