import TokenRelayLogging

/// How the client authenticates to the token endpoint (RFC 6749 §2.3, RFC 8414 names).
public enum ClientAuthMethod: String, Sendable, Hashable, CaseIterable {
    /// `Authorization: Basic base64(formencode(id):formencode(secret))`.
    case clientSecretBasic = "client_secret_basic"
    /// `client_id` and `client_secret` in the form body.
    case clientSecretPost = "client_secret_post"
    /// A public client: `client_id` in the body, no secret sent at all.
    case none
    /// A JWT signed with the client's private key (RFC 7523 §2.2): no secret is sent.
    case privateKeyJWT = "private_key_jwt"
    /// Mutual TLS with a certificate of a PKI the server trusts (RFC 8705 §2.1).
    case tlsClientAuth = "tls_client_auth"
    /// Mutual TLS with a self-signed certificate registered at the server (RFC 8705 §2.2).
    case selfSignedTLSClientAuth = "self_signed_tls_client_auth"

    /// Whether the client authenticates with its TLS certificate.
    public var isMutualTLS: Bool { self == .tlsClientAuth || self == .selfSignedTLSClientAuth }
}

/// A secret resolved late (environment, file, command) by whoever built the configuration. The
/// resolved value is registered with the ``Redactor`` before it is used.
public struct SecretProvider: Sendable {
    private let resolver: @Sendable () async throws -> String

    /// A secret produced by `resolver` each time it is needed.
    public init(_ resolver: @escaping @Sendable () async throws -> String) {
        self.resolver = resolver
    }

    /// A secret already known; it is registered with the redactor at once.
    public static func value(_ secret: String) -> SecretProvider {
        Redactor.shared.register(secret)
        return SecretProvider { secret }
    }

    /// Resolves the secret and registers it with the redactor (as a value that may be replaced:
    /// each resolution marks it as in use).
    public func resolve() async throws -> String {
        let secret = try await resolver()
        Redactor.shared.registerToken(secret)
        return secret
    }

    /// ``resolve()``, a failure that is not already an ``AuthError`` becoming a `config` error that
    /// says `what` could not be resolved (the source's own error is not shown: its text may hold
    /// what the source read).
    func resolve(_ what: String) async throws(AuthError) -> String {
        do {
            return try await resolve()
        } catch let error as AuthError {
            throw error
        } catch {
            throw .configuration("\(what) could not be resolved")
        }
    }
}

/// Which grant a session uses to obtain tokens.
public enum Grant: Sendable {
    /// `client_credentials`; a refresh token, if the server issues one, is used for renewals.
    case clientCredentials
    /// `refresh_token` seeded out of band; after the first rotation the store holds the current
    /// refresh token.
    case refreshToken(seed: SecretProvider)
    /// A person logs in (`authorization_code` or `device_code`, SPEC §5.4); renewed by refresh token.
    case interactive(InteractiveLogin)
    /// The jwt-bearer grant (RFC 7523 §2.1) with an assertion read again for every acquisition.
    case jwtBearer(AssertionSource)
    /// Token exchange (RFC 8693).
    case tokenExchange(TokenExchange)

    /// The profile type / grant name (`client_credentials`, `refresh_token`, `authorization_code`,
    /// `device_code`).
    public var name: String {
        switch self {
        case .clientCredentials: "client_credentials"
        case .refreshToken: "refresh_token"
        case .interactive(let login): login.flow.name
        case .jwtBearer: "jwt_bearer"
        case .tokenExchange: "token_exchange"
        }
    }

    /// What else the token depends on (see ``SessionKey/variant``).
    public var variant: String? {
        switch self {
        case .tokenExchange(let exchange): return exchange.variant
        case .jwtBearer(.session(_, let profile, _)): return "assertion=profile(" + profile + ")"
        default: return nil
        }
    }

    /// The interactive login settings, for interactive grants.
    public var interactive: InteractiveLogin? {
        if case .interactive(let login) = self { return login }
        return nil
    }
}

/// How a person logs in to an interactive session (SPEC §5.4).
public struct InteractiveLogin: Sendable {
    /// The grant of the login.
    public enum Flow: Sendable, Equatable {
        /// Authorization code + PKCE S256 with a loopback redirect (RFC 8252): the listener tries
        /// `ports` in order (0 = ephemeral) and serves `path`.
        case authorizationCode(ports: [Int], path: String)
        /// The device authorization grant (RFC 8628).
        case deviceCode

        /// The profile type name.
        public var name: String {
            switch self {
            case .authorizationCode: "authorization_code"
            case .deviceCode: "device_code"
            }
        }
    }

    /// The flow.
    public var flow: Flow
    /// Overrides the verified discovery's `authorization_endpoint`.
    public var authorizationURL: String?
    /// Overrides the verified discovery's `device_authorization_endpoint`.
    public var deviceAuthorizationURL: String?
    /// Bounds one login (default 5 minutes).
    public var timeout: Duration
    /// Extra parameters of the authorization (and device authorization) request, in order.
    public var authorizationParameters: [(String, String)]
    /// Extra parameters of every token endpoint request of the session, in order.
    public var tokenParameters: [(String, String)]
    /// Opens the authorization URL for the person (`open_browser`); nil: the URL is only shown.
    public var openBrowser: (@Sendable (String) async -> Void)?

    /// Creates login settings.
    public init(
        flow: Flow, authorizationURL: String? = nil, deviceAuthorizationURL: String? = nil,
        timeout: Duration = .seconds(300), authorizationParameters: [(String, String)] = [],
        tokenParameters: [(String, String)] = [], openBrowser: (@Sendable (String) async -> Void)? = nil
    ) {
        self.flow = flow
        self.authorizationURL = authorizationURL
        self.deviceAuthorizationURL = deviceAuthorizationURL
        self.timeout = timeout
        self.authorizationParameters = authorizationParameters
        self.tokenParameters = tokenParameters
        self.openBrowser = openBrowser
    }
}

/// Everything the token manager needs to obtain tokens for one profile. Built by the Relay from
/// the settings; Auth does not depend on Config.
public struct OAuthClientConfiguration: Sendable {
    /// The trusted issuer; metadata is discovered from it (RFC 8414, then OIDC) and its `issuer`
    /// must equal this exactly.
    public var issuer: String?
    /// An explicit token endpoint. With `issuer` also set, discovery still runs to verify the
    /// issuer and its client-authentication methods, but tokens are fetched here.
    public var tokenURL: String?
    /// The client identifier.
    public var clientID: String
    /// The client secret (not used with ``ClientAuthMethod/none``).
    public var clientSecret: SecretProvider?
    /// How the client authenticates.
    public var clientAuth: ClientAuthMethod
    /// The key of ``ClientAuthMethod/privateKeyJWT``.
    public var clientKey: ClientKey?
    /// Requested scopes, sorted and without duplicates.
    public var scopes: [String]
    /// The `audience` parameter, if any.
    public var audience: String?
    /// RFC 8707 `resource` parameters, sorted.
    public var resources: [String]
    /// The renewal margin before expiry (capped at half the token's lifetime).
    public var expirySkew: Duration
    /// The grant.
    public var grant: Grant
    /// Bounds an acquisition (retries included) when no caller gave a deadline.
    public var acquisitionTimeout: Duration
    /// DPoP (RFC 9449, SPEC §10): tokens bound to a key of the session's, with a proof on every
    /// token and resource request.
    public var dpop: Bool
    /// Mutual TLS (`tls_client_auth`, `self_signed_tls_client_auth`): the client certificate (PEM);
    /// its key is ``clientKey``'s.
    public var clientCertificate: SecretProvider?
    /// The tokens are bound to the client certificate (RFC 8705 §3): the profile's API requests
    /// present it too. Also decided by a token's own `cnf` `x5t#S256`.
    public var mtlsBound: Bool
    /// The client and its authentication come from a registration the server accepted (SPEC
    /// §9.4): its method is used as registered, not checked against the server's list.
    public var clientAuthRegistered = false

    /// Creates a configuration; scopes and resources are sorted and deduplicated.
    public init(
        issuer: String? = nil, tokenURL: String? = nil, clientID: String, clientSecret: SecretProvider? = nil,
        clientAuth: ClientAuthMethod = .clientSecretBasic, clientKey: ClientKey? = nil, scopes: [String] = [],
        audience: String? = nil, resources: [String] = [], expirySkew: Duration = .seconds(30),
        grant: Grant = .clientCredentials, acquisitionTimeout: Duration = .seconds(30), dpop: Bool = false,
        clientCertificate: SecretProvider? = nil, mtlsBound: Bool = false
    ) {
        self.issuer = issuer
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientAuth = clientAuth
        self.clientKey = clientKey
        self.scopes = Array(Set(scopes)).sorted()
        self.audience = audience
        self.resources = Array(Set(resources)).sorted()
        self.expirySkew = expirySkew
        self.grant = grant
        self.acquisitionTimeout = acquisitionTimeout
        self.dpop = dpop
        self.clientCertificate = clientCertificate
        self.mtlsBound = mtlsBound
    }

    /// Whether the session is OpenID Connect (`openid` among the scopes): its ID token is validated.
    public var isOpenIDConnect: Bool { scopes.contains("openid") }

    /// Checks what can be checked without the network: an endpoint or issuer is present and
    /// allowed, a secret is present when the method needs one.
    public func validate() throws(AuthError) {
        guard issuer != nil || tokenURL != nil else {
            throw .configuration("either issuer or token_url is required")
        }
        if let tokenURL { try EndpointPolicy.precheck(tokenURL, what: "token_url") }
        if let issuer { try EndpointPolicy.precheck(issuer, what: "issuer") }
        if let login = grant.interactive {
            if let url = login.authorizationURL { try EndpointPolicy.precheck(url, what: "authorization_url") }
            if let url = login.deviceAuthorizationURL {
                try EndpointPolicy.precheck(url, what: "device_authorization_url")
            }
        }
        switch clientAuth {
        case .none: break
        case .privateKeyJWT:
            guard let clientKey else { throw .configuration("client_auth private_key_jwt needs a client_key") }
            if clientKey.audience == .issuer && issuer == nil {
                throw .configuration("client_assertion_audience: issuer needs an issuer")
            }
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            guard clientCertificate != nil, clientKey != nil else {
                throw .configuration("client_auth \(clientAuth.rawValue) needs a client_cert and a client_key")
            }
        case .clientSecretBasic, .clientSecretPost:
            if clientSecret == nil { throw .configuration("client_auth \(clientAuth.rawValue) needs a client_secret") }
        }
        guard !clientID.isEmpty || namesNoClient else { throw .configuration("client_id is empty") }
    }

    /// A jwt-bearer session without a client id (RFC 7523 §3.1, SPEC §10): its token requests
    /// name no client and authenticate none.
    public var namesNoClient: Bool {
        guard clientID.isEmpty, clientAuth == .none, case .jwtBearer = grant else { return false }
        return true
    }
}
