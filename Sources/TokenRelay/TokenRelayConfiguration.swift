import TokenRelayJSONRPC

/// A configuration built in code: the same settings a config file holds (see the README's
/// configuration reference), checked the same way when ``TokenRelayClient/make(_:)`` opens it.
///
/// ```swift
/// let configuration = TokenRelayConfiguration(environments: [
///     .init("api", baseURL: "https://api.example.com", profiles: [
///         .init("service", .clientCredentials(
///             tokenURL: "https://auth.example.com/oauth/token", clientID: "my-service",
///             clientSecret: .environment("SERVICE_SECRET"), scopes: ["read"]))
///     ])
/// ])
/// ```
public struct TokenRelayConfiguration: Sendable {
    /// The environments; the first is the default unless ``defaultEnvironment`` names another.
    public var environments: [Environment]
    /// The environment used when a call names none.
    public var defaultEnvironment: String?
    /// Where sessions are kept.
    public var store: Store

    public init(environments: [Environment], defaultEnvironment: String? = nil, store: Store = .memory) {
        self.environments = environments
        self.defaultEnvironment = defaultEnvironment
        self.store = store
    }

    /// Where sessions (tokens) are kept.
    public enum Store: Sendable {
        /// In this process only.
        case memory
        /// The SQLite store shared with the `tokenrelay` command (default path when `nil`).
        case sqlite(path: String?)
    }

    /// Where a secret comes from. Prefer anything but ``value(_:)`` outside tests.
    public enum Secret: Sendable {
        /// The value itself.
        case value(String)
        /// An environment variable.
        case environment(String)
        /// A file's contents.
        case file(String)
        /// A command's output (`["pass", "show", "api/key"]`).
        case command([String])
    }

    /// One API: its base URL, the origins its credentials may go to, and its profiles.
    public struct Environment: Sendable {
        public var name: String
        public var baseURL: String
        public var profiles: [Profile]
        /// The profile used when a call names none (default: the first).
        public var defaultProfile: String?
        /// Other origins that may receive this environment's credentials.
        public var allowedOrigins: [String]

        public init(
            _ name: String, baseURL: String, profiles: [Profile], defaultProfile: String? = nil,
            allowedOrigins: [String] = []
        ) {
            self.name = name
            self.baseURL = baseURL
            self.profiles = profiles
            self.defaultProfile = defaultProfile
            self.allowedOrigins = allowedOrigins
        }
    }

    /// One way of authenticating.
    public struct Profile: Sendable {
        public var name: String
        public var kind: Kind
        /// Whether ``TokenRelayClient/token(environment:profile:minimumValidity:)`` may hand out its token.
        public var exposeToken: Bool

        public init(_ name: String, _ kind: Kind, exposeToken: Bool = false) {
            self.name = name
            self.kind = kind
            self.exposeToken = exposeToken
        }
    }

    /// The profile types a configuration built in code offers (a config file offers every type).
    public enum Kind: Sendable {
        /// An API key in a header.
        case apiKey(header: String, value: Secret)
        /// A fixed bearer token.
        case bearer(token: Secret)
        /// OAuth 2.0 client credentials (RFC 6749 §4.4).
        case clientCredentials(tokenURL: String, clientID: String, clientSecret: Secret, scopes: [String] = [])
        /// An interactive login: authorization code with PKCE (RFC 7636) against `issuer`'s
        /// discovered endpoints, through a loopback redirect.
        case authorizationCode(issuer: String, clientID: String, scopes: [String] = [])
    }

    /// The configuration as the JSON text the config loader reads (JSON is YAML).
    var jsonText: String {
        var root: JSONObject = ["version": .int(1)]
        if let name = defaultEnvironment ?? environments.first?.name { root["default_environment"] = .string(name) }
        switch store {
        case .memory: root["store"] = ["type": "memory"]
        case .sqlite(let path):
            var object: JSONObject = ["type": "sqlite"]
            if let path { object["path"] = .string(path) }
            root["store"] = .object(object)
        }
        var environmentsObject = JSONObject()
        for environment in environments {
            var object: JSONObject = ["base_url": .string(environment.baseURL)]
            if let name = environment.defaultProfile ?? environment.profiles.first?.name {
                object["default_profile"] = .string(name)
            }
            if !environment.allowedOrigins.isEmpty {
                object["allowed_origins"] = .array(environment.allowedOrigins.map { .string($0) })
            }
            var profiles = JSONObject()
            for profile in environment.profiles { profiles[profile.name] = .object(Self.profileObject(profile)) }
            object["profiles"] = .object(profiles)
            environmentsObject[environment.name] = .object(object)
        }
        root["environments"] = .object(environmentsObject)
        return JSONValue.object(root).jsonText
    }

    private static func secret(_ secret: Secret) -> JSONValue {
        switch secret {
        case .value(let value): .string(value)
        case .environment(let name): ["env": .string(name)]
        case .file(let path): ["file": .string(path)]
        case .command(let arguments): ["command": .array(arguments.map { .string($0) })]
        }
    }

    private static func profileObject(_ profile: Profile) -> JSONObject {
        var object: JSONObject
        switch profile.kind {
        case .apiKey(let header, let value):
            object = ["type": "api_key", "header": .string(header), "value": secret(value)]
        case .bearer(let token):
            object = ["type": "bearer", "token": secret(token)]
        case .clientCredentials(let tokenURL, let clientID, let clientSecret, let scopes):
            object = [
                "type": "client_credentials", "token_url": .string(tokenURL), "client_id": .string(clientID),
                "client_secret": secret(clientSecret),
            ]
            if !scopes.isEmpty { object["scopes"] = .array(scopes.map { .string($0) }) }
        case .authorizationCode(let issuer, let clientID, let scopes):
            object = ["type": "authorization_code", "issuer": .string(issuer), "client_id": .string(clientID)]
            if !scopes.isEmpty { object["scopes"] = .array(scopes.map { .string($0) }) }
        }
        if profile.exposeToken { object["expose_token"] = true }
        return object
    }
}
