import FoundationEssentials
import Glibc

/// The whole, validated configuration. Secrets are not resolved yet: they are ``SecretSource``s.
public struct Settings: Sendable, CustomStringConvertible {
    /// The config format version (always 1).
    public var version: Int
    /// The environment used when a request names none.
    public var defaultEnvironment: String?
    /// The environments in file order.
    public var environments: [EnvironmentSettings]
    /// Where tokens are kept.
    public var store: StoreSettings
    /// Server limits.
    public var server: ServerSettings
    /// The file the settings came from (`nil` when there was none).
    public var file: String?
    /// Every environment variable a secret source reads (`{ env: NAME }`, the store key's
    /// included): what `tokenrelay exec` removes from its child's environment.
    public var secretVariables: Set<String> = []

    public init(
        version: Int = 1, defaultEnvironment: String? = nil, environments: [EnvironmentSettings] = [],
        store: StoreSettings = StoreSettings(), server: ServerSettings = ServerSettings(), file: String? = nil
    ) {
        self.version = version
        self.defaultEnvironment = defaultEnvironment
        self.environments = environments
        self.store = store
        self.server = server
        self.file = file
    }

    /// Settings with no environments (a missing implicit config file).
    public static let empty = Settings()

    /// The environment called `name`.
    public func environment(named name: String) -> EnvironmentSettings? {
        environments.first { $0.name == name }
    }

    public var description: String {
        "Settings(version: \(version), environments: \(environments.map(\.name)), store: \(store.type.rawValue))"
    }
}

/// Limits of the JSON-RPC server.
public struct ServerSettings: Sendable, Hashable {
    /// Requests executing at once (default 256); also the connections each environment's
    /// transport keeps open after use.
    public var maxConcurrentRequests: Int
    /// Requests waiting for a slot before new ones are refused (default 10,000).
    public var maxQueuedRequests: Int
    /// The largest incoming message, in bytes (default 64 MiB).
    public var maxMessageBytes: Int

    public init(
        maxConcurrentRequests: Int = 256, maxQueuedRequests: Int = 10_000, maxMessageBytes: Int = 64 * 1024 * 1024
    ) {
        self.maxConcurrentRequests = maxConcurrentRequests
        self.maxQueuedRequests = maxQueuedRequests
        self.maxMessageBytes = maxMessageBytes
    }
}

/// Where token state is kept (SPEC §5.6).
public struct StoreSettings: Sendable, Hashable {
    /// The store kinds.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case memory, sqlite
    }

    /// SQLite (default: sessions outlive the process and are shared) or memory (opt-out).
    public var type: Kind
    /// The SQLite file (absolute, `~` expanded); `nil` for memory, or for the default
    /// (``defaultPath(environment:)``, resolved when the store is made).
    public var path: String?
    /// The key sealing tokens at rest (32 bytes, base64 or hex: `encryption_key`, or `key` given a
    /// secret source); `nil`: ``key`` says.
    public var encryptionKey: SecretSource?
    /// Without ``encryptionKey``: the secret service's key (``KeyChoice``).
    public var key: KeyChoice = .automatic
    /// A tier shared by a fleet of hosts (SPEC §11), if configured.
    public var shared: SharedTierSettings?

    public init(
        type: Kind = .sqlite, path: String? = nil, encryptionKey: SecretSource? = nil, shared: SharedTierSettings? = nil
    ) {
        self.type = type
        self.path = path
        self.encryptionKey = encryptionKey
        self.shared = shared
    }

    /// Where the key comes from when no secret source is configured (`store.key`).
    public enum KeyChoice: String, Sendable, Hashable {
        /// Not said: the secret service's key where there is one, plain text (said) elsewhere.
        case automatic
        /// `key: keyring`: the secret service's key, or the store is refused.
        case keyring
        /// `key: none`: plain text.
        case none
    }

    /// `$XDG_STATE_HOME/tokenrelay/sessions.db`, else `~/.local/state/tokenrelay/sessions.db`.
    public static func defaultPath(environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/tokenrelay/sessions.db"
        }
        let home =
            environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.path(percentEncoded: false)
        return home + "/.local/state/tokenrelay/sessions.db"
    }

    /// Equal when the type, path and key source (as written, not as resolved) are.
    public static func == (lhs: StoreSettings, rhs: StoreSettings) -> Bool {
        lhs.type == rhs.type && lhs.path == rhs.path && lhs.encryptionKey?.origin == rhs.encryptionKey?.origin
            && lhs.key == rhs.key && lhs.shared == rhs.shared
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(type)
        hasher.combine(path)
        hasher.combine(encryptionKey?.origin)
        hasher.combine(key)
        hasher.combine(shared)
    }
}

/// `store.shared`: a PostgreSQL tier a fleet of hosts shares (SPEC §11).
public struct SharedTierSettings: Sendable, Hashable {
    /// The libpq connection URL (no password in it).
    public var url: String
    /// The password (a secret source), when libpq's own sources do not give it.
    public var password: SecretSource?
    /// The bound of every call to the tier (default 2 s).
    public var timeout: Duration
    /// The schema of the tier's tables (default `tokenrelay`).
    public var schema: String

    public init(
        url: String, password: SecretSource? = nil, timeout: Duration = .seconds(2), schema: String = "tokenrelay"
    ) {
        self.url = url
        self.password = password
        self.timeout = timeout
        self.schema = schema
    }

    /// Equal when everything is, the password source compared as written.
    public static func == (lhs: SharedTierSettings, rhs: SharedTierSettings) -> Bool {
        lhs.url == rhs.url && lhs.password?.origin == rhs.password?.origin && lhs.timeout == rhs.timeout
            && lhs.schema == rhs.schema
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(url)
        hasher.combine(password?.origin)
        hasher.combine(timeout)
        hasher.combine(schema)
    }
}

/// Timing of event-stream subscriptions in one environment.
public struct EventsSettings: Sendable, Hashable {
    /// A stream that delivers nothing (not even a comment) for this long is reconnected (default 45 s).
    public var idleTimeout: Duration
    /// The cap of the reconnect backoff (default 30 s).
    public var maxBackoff: Duration

    public init(idleTimeout: Duration = .seconds(45), maxBackoff: Duration = .seconds(30)) {
        self.idleTimeout = idleTimeout
        self.maxBackoff = maxBackoff
    }
}

/// One environment: a base URL, its defaults and its profiles.
public struct EnvironmentSettings: Sendable, CustomStringConvertible {
    /// The environment's name (its key under `environments`).
    public var name: String
    /// The absolute http(s) base URL; a request `path` is appended to it.
    public var baseURL: String
    /// The profile used when a request names none.
    public var defaultProfile: String?
    /// Headers added to requests to the environment's origins, in file order.
    public var headers: [(name: String, value: String)]
    /// Bounds a whole request (default 30 s).
    public var timeout: Duration
    /// Bounds connection setup (default 10 s).
    public var connectTimeout: Duration
    /// Other origins (`scheme://host[:port]`, normalised) that receive credentials and headers.
    public var allowedOrigins: [String]
    /// A CA bundle to trust (absolute path).
    public var caFile: String?
    /// A proxy URL.
    public var proxy: String?
    /// The largest response body accepted, in bytes (default 32 MiB).
    public var maxResponseBytes: Int
    /// Event-stream timing.
    public var events: EventsSettings
    /// The profiles in file order.
    public var profiles: [ProfileSettings]
    /// What `tokenrelay mcp` exposes of the environment (all its profiles); `nil`: nothing,
    /// unless a profile has a block of its own.
    public var mcp: MCPSettings?
    /// What `tokenrelay exec` serves of the environment; `nil`: served only when named with `--env`.
    public var exec: ExecSettings?
    /// Where the environment is defined.
    public var mark: SourceMark

    public init(
        name: String, baseURL: String, defaultProfile: String? = nil, headers: [(name: String, value: String)] = [],
        timeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(10), allowedOrigins: [String] = [],
        caFile: String? = nil, proxy: String? = nil, maxResponseBytes: Int = 32 * 1024 * 1024,
        events: EventsSettings = EventsSettings(), profiles: [ProfileSettings] = [], mark: SourceMark = .file
    ) {
        self.name = name
        self.baseURL = baseURL
        self.defaultProfile = defaultProfile
        self.headers = headers
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.allowedOrigins = allowedOrigins
        self.caFile = caFile
        self.proxy = proxy
        self.maxResponseBytes = maxResponseBytes
        self.events = events
        self.profiles = profiles
        self.mark = mark
    }

    /// The profile called `name`.
    public func profile(named name: String) -> ProfileSettings? {
        profiles.first { $0.name == name }
    }

    public var description: String {
        "EnvironmentSettings(name: \(name), baseURL: \(baseURL), profiles: \(profiles.map(\.name)))"
    }
}

/// One profile: a way of authenticating requests.
public struct ProfileSettings: Sendable, CustomStringConvertible {
    /// The profile's name (its key under `profiles`).
    public var name: String
    /// The YAML `type` string (`client_credentials`, `api_key`, ...).
    public var typeName: String
    /// Whether `token-get` may return this profile's access token.
    public var exposeToken: Bool
    /// The `username` the git credential helper answers with (`git_username`).
    public var gitUsername: String
    /// The type and its settings.
    public var kind: ProfileKind
    /// What `tokenrelay mcp` exposes of this profile, under these rules (they replace the
    /// environment's); `nil`: the environment's block decides.
    public var mcp: MCPSettings?
    /// Where the profile is defined.
    public var mark: SourceMark

    /// The `git_username` used when the profile sets none (what GitHub and most forges accept).
    public static let defaultGitUsername = "x-access-token"

    public init(
        name: String, typeName: String, exposeToken: Bool = false, gitUsername: String = defaultGitUsername,
        kind: ProfileKind, mark: SourceMark = .file
    ) {
        self.name = name
        self.typeName = typeName
        self.exposeToken = exposeToken
        self.gitUsername = gitUsername
        self.kind = kind
        self.mark = mark
    }

    /// Whether the profile needs a person to log in (authorization code, device code).
    public var isInteractive: Bool {
        switch kind {
        case .authorizationCode, .deviceCode: return true
        default: return false
        }
    }

    public var description: String { "ProfileSettings(name: \(name), type: \(typeName))" }
}

/// A profile's type with its settings.
public enum ProfileKind: Sendable {
    /// OAuth 2 client credentials grant.
    case clientCredentials(OAuthClientSettings)
    /// OAuth 2 refresh grant, seeded with a refresh token provisioned out of band.
    case refreshToken(OAuthClientSettings, refreshToken: SecretSource)
    /// Authorization code + PKCE with a loopback redirect (interactive).
    case authorizationCode(OAuthClientSettings, InteractiveLoginSettings)
    /// Device authorization grant (interactive).
    case deviceCode(OAuthClientSettings, InteractiveLoginSettings)
    /// The jwt-bearer grant (RFC 7523 §2.1): a workload's platform-issued JWT for a token.
    case jwtBearer(OAuthClientSettings, assertion: AssertionSettings)
    /// Token exchange (RFC 8693): another token traded for one of this profile's.
    case tokenExchange(OAuthClientSettings, TokenExchangeSettings)
    /// A static key in a header or a query parameter.
    case apiKey(placement: APIKeyPlacement, value: SecretSource)
    /// HTTP Basic authentication.
    case basic(username: String, password: SecretSource)
    /// A static bearer token, possibly from a command, cached for `cache`.
    case bearer(token: SecretSource, cache: Duration?)

    /// The OAuth client of an OAuth profile; `nil` for the others.
    public var oauthClient: OAuthClientSettings? {
        switch self {
        case .clientCredentials(let client), .refreshToken(let client, _), .authorizationCode(let client, _),
            .deviceCode(let client, _), .jwtBearer(let client, _), .tokenExchange(let client, _):
            client
        case .apiKey, .basic, .bearer: nil
        }
    }
}

/// Where a `jwt_bearer` profile's assertion comes from (`assertion`), read for every acquisition.
public enum AssertionSettings: Sendable {
    /// A secret source holding the JWT (a projected service-account token file, a JWT-SVID...).
    case secret(SecretSource)
    /// `{ github_actions: { audience } }`: the job's OIDC token, asked of the Actions runtime at
    /// `ACTIONS_ID_TOKEN_REQUEST_URL` with `ACTIONS_ID_TOKEN_REQUEST_TOKEN`.
    case githubActions(audience: String?, requestURL: SecretSource, requestToken: SecretSource)
    /// `{ profile: P }`: profile P's current access token (same environment), e.g. an ID-JAG
    /// (SPEC §9.9).
    case profile(String)

    /// Equal as written (sources by origin).
    public func isSameAsWritten(_ other: AssertionSettings) -> Bool {
        switch (self, other) {
        case (.secret(let a), .secret(let b)): a.isSameAsWritten(b)
        case (.githubActions(let a, _, _), .githubActions(let b, _, _)): a == b
        case (.profile(let a), .profile(let b)): a == b
        default: false
        }
    }
}

/// A `token_exchange` profile's settings (RFC 8693 §2.1).
public struct TokenExchangeSettings: Sendable {
    /// A token presented in the exchange.
    public enum Token: Sendable {
        /// `{ profile: P }`: profile P's current access token (same environment); with `token:
        /// id_token` (`idToken`), the ID token of P's login instead.
        case profile(String, idToken: Bool = false)
        /// A secret source holding the token.
        case secret(SecretSource)

        func isSameAsWritten(_ other: Token) -> Bool {
            switch (self, other) {
            case (.profile(let a, let aID), .profile(let b, let bID)): a == b && aID == bID
            case (.secret(let a), .secret(let b)): a.isSameAsWritten(b)
            default: false
            }
        }
    }

    /// `subject` or `subject_token`.
    public var subject: Token
    /// `subject_token_type` (a URI; default `urn:ietf:params:oauth:token-type:access_token`).
    public var subjectTokenType: String
    /// `requested_token_type`, if any.
    public var requestedTokenType: String?
    /// `actor` or `actor_token`, if any.
    public var actor: Token?
    /// `actor_token_type` (default the access-token URI).
    public var actorTokenType: String

    /// The RFC 8693 §3 URI prefix of the short type names (`access_token`, `jwt`, `id_token`...).
    public static let typePrefix = "urn:ietf:params:oauth:token-type:"
    /// The RFC 8693 §3 URI of an OpenID Connect ID token.
    public static let idTokenType = typePrefix + "id_token"

    public init(
        subject: Token, subjectTokenType: String = typePrefix + "access_token", requestedTokenType: String? = nil,
        actor: Token? = nil, actorTokenType: String = typePrefix + "access_token"
    ) {
        self.subject = subject
        self.subjectTokenType = subjectTokenType
        self.requestedTokenType = requestedTokenType
        self.actor = actor
        self.actorTokenType = actorTokenType
    }

    /// Equal as written.
    public func isSameAsWritten(_ other: TokenExchangeSettings) -> Bool {
        subject.isSameAsWritten(other.subject) && subjectTokenType == other.subjectTokenType
            && requestedTokenType == other.requestedTokenType && actorTokenType == other.actorTokenType
            && (actor == nil) == (other.actor == nil)
            && (actor.flatMap { a in other.actor.map { a.isSameAsWritten($0) } } ?? true)
    }

    /// The profiles whose tokens this exchange presents.
    public var profileReferences: [String] {
        [subject, actor].compactMap { if case .profile(let name, _)? = $0 { return name } else { return nil } }
    }
}

/// The login settings of an interactive profile (SPEC §5.4).
public struct InteractiveLoginSettings: Sendable {
    /// What `open_browser` asks for.
    public enum BrowserOpening: Sendable, Equatable {
        /// Only show the URL (the default).
        case off
        /// `xdg-open URL` (`open` on macOS).
        case system
        /// This argv with the URL appended, run like a secret command (no shell).
        case command([String])
    }

    /// `authorization_url`: overrides the discovered authorization endpoint.
    public var authorizationURL: String?
    /// `device_authorization_url`: overrides the discovered device authorization endpoint.
    public var deviceAuthorizationURL: String?
    /// `redirect.port`: ports tried in order (0 = ephemeral; the default).
    public var redirectPorts: [Int]
    /// `redirect.path` (default `/callback`).
    public var redirectPath: String
    /// `open_browser`.
    public var openBrowser: BrowserOpening
    /// `login_timeout` (default 5 minutes).
    public var loginTimeout: Duration
    /// `parameters.authorization`, in order.
    public var authorizationParameters: [(String, String)]
    /// `parameters.token`, in order.
    public var tokenParameters: [(String, String)]

    public init(
        authorizationURL: String? = nil, deviceAuthorizationURL: String? = nil, redirectPorts: [Int] = [0],
        redirectPath: String = "/callback", openBrowser: BrowserOpening = .off, loginTimeout: Duration = .seconds(300),
        authorizationParameters: [(String, String)] = [], tokenParameters: [(String, String)] = []
    ) {
        self.authorizationURL = authorizationURL
        self.deviceAuthorizationURL = deviceAuthorizationURL
        self.redirectPorts = redirectPorts
        self.redirectPath = redirectPath
        self.openBrowser = openBrowser
        self.loginTimeout = loginTimeout
        self.authorizationParameters = authorizationParameters
        self.tokenParameters = tokenParameters
    }
}

/// Where an API key goes.
public enum APIKeyPlacement: Sendable, Hashable {
    /// In the header with this name.
    case header(String)
    /// In the query parameter with this name.
    case query(String)
}

/// How an OAuth client authenticates at the token endpoint.
public enum ClientAuthMethod: String, Sendable, Hashable, CaseIterable {
    case clientSecretBasic = "client_secret_basic"
    case clientSecretPost = "client_secret_post"
    case none
    case privateKeyJWT = "private_key_jwt"
    case tlsClientAuth = "tls_client_auth"
    case selfSignedTLSClientAuth = "self_signed_tls_client_auth"

    /// Whether the client authenticates with its TLS certificate (RFC 8705).
    public var isMutualTLS: Bool { self == .tlsClientAuth || self == .selfSignedTLSClientAuth }
}

/// `private_key_jwt`: the key that signs the client's assertions (RFC 7523 §2.2).
public struct ClientKeySettings: Sendable {
    /// Which `aud` the assertions name (`client_assertion_audience`).
    public enum Audience: String, Sendable, Hashable, CaseIterable {
        case tokenEndpoint = "token_endpoint"
        case issuer
    }

    /// `client_key`: a PEM private key (EC P-256 or RSA ≥ 2048 bits).
    public var key: SecretSource
    /// `client_key_alg`: ES256, RS256 or PS256 (`nil`: from the key).
    public var algorithm: String?
    /// `client_key_id`: the JWS `kid`.
    public var keyID: String?
    /// `client_assertion_audience` (default `token_endpoint`).
    public var audience: Audience

    public init(key: SecretSource, algorithm: String? = nil, keyID: String? = nil, audience: Audience = .tokenEndpoint)
    {
        self.key = key
        self.algorithm = algorithm
        self.keyID = keyID
        self.audience = audience
    }
}

/// The settings shared by every OAuth profile type.
public struct OAuthClientSettings: Sendable, CustomStringConvertible {
    /// The issuer, used for discovery (RFC 8414 / OIDC) and verified against its metadata.
    public var issuer: String?
    /// An explicit token endpoint (overrides the discovered one).
    public var tokenURL: String?
    /// The client identifier.
    public var clientID: String
    /// The client secret, for confidential clients.
    public var clientSecret: SecretSource?
    /// How the client authenticates.
    public var clientAuth: ClientAuthMethod
    /// The key of `private_key_jwt`.
    public var clientKey: ClientKeySettings?
    /// Requested scopes, in order.
    public var scopes: [String]
    /// The `audience` parameter.
    public var audience: String?
    /// The `resource` indicators (RFC 8707).
    public var resource: [String]
    /// Renew this long before expiry (default 30 s).
    public var expirySkew: Duration
    /// `discover: true` and its options (SPEC §9); `nil`: configured by hand. A discovered
    /// `authorization_code` profile may leave `clientID` empty: it registers itself.
    public var discovery: DiscoverySettings?
    /// `dpop: true`: DPoP-bound tokens (RFC 9449, SPEC §10).
    public var dpop = false
    /// `client_cert`: the mutual-TLS client certificate (PEM; its key is `client_key`).
    public var clientCertificate: SecretSource?
    /// `mtls_bound: true`: the tokens are bound to the client certificate (RFC 8705 §3).
    public var mtlsBound = false

    public init(
        issuer: String? = nil, tokenURL: String? = nil, clientID: String, clientSecret: SecretSource? = nil,
        clientAuth: ClientAuthMethod? = nil, clientKey: ClientKeySettings? = nil, scopes: [String] = [],
        audience: String? = nil, resource: [String] = [], expirySkew: Duration = .seconds(30)
    ) {
        self.issuer = issuer
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientAuth =
            clientAuth ?? (clientKey != nil ? .privateKeyJWT : clientSecret == nil ? .none : .clientSecretBasic)
        self.clientKey = clientKey
        self.scopes = scopes
        self.audience = audience
        self.resource = resource
        self.expirySkew = expirySkew
    }

    public var description: String {
        "OAuthClientSettings(issuer: \(issuer ?? "-"), tokenURL: \(tokenURL ?? "-"), clientID: \(clientID), "
            + "clientSecret: \(clientSecret == nil ? "none" : "<secret>"), clientAuth: \(clientAuth.rawValue), scopes: \(scopes))"
    }
}
