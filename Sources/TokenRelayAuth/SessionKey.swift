/// Identifies one token session: the profile and everything that changes the token it gets.
/// Contains no secret.
public struct SessionKey: Sendable, Hashable, CustomStringConvertible {
    /// The environment name.
    public let environment: String
    /// The profile name.
    public let profile: String
    /// The configured issuer, if any.
    public let issuer: String?
    /// The configured token endpoint override, if any.
    public let tokenEndpoint: String?
    /// The client identifier.
    public let clientID: String
    /// The grant name (`client_credentials`, `refresh_token`).
    public let grant: String
    /// Sorted scopes.
    public let scopes: [String]
    /// The audience, if any.
    public let audience: String?
    /// Sorted resources.
    public let resources: [String]
    /// What else the grant's token depends on (a token exchange's subject session and parameters);
    /// `nil` for the other grants (their keys are as they always were).
    public let variant: String?
    /// Whether the session is a machine's identity: its token comes from the client's own
    /// credentials or assertion (`client_credentials`, `jwt_bearer`), or from exchanging only such
    /// sessions' tokens (`token_exchange`), never from a person's login or a refresh token. Only
    /// these may be shared across a fleet's hosts (SPEC §11). An exchange of a secret source's
    /// token is not: the key names where that token is read, not whose it is, and two hosts may
    /// hold different people's tokens there. Derived from the grant (and a token exchange's
    /// sources), so it adds nothing to the key's identity.
    public let isMachineIdentity: Bool
    /// Whether the session's tokens may be bound to something only this host holds: a DPoP key
    /// (``OAuthClientConfiguration/dpop``) or a client certificate (mutual TLS, RFC 8705 §3).
    /// Such tokens are never shared across a fleet (SPEC §11).
    public let mayHoldBoundTokens: Bool

    /// The key of `configuration` used by `environment`/`profile`.
    public init(environment: String, profile: String, configuration: OAuthClientConfiguration) {
        self.environment = environment
        self.profile = profile
        issuer = configuration.issuer
        tokenEndpoint = configuration.tokenURL
        clientID = configuration.clientID
        grant = configuration.grant.name
        scopes = configuration.scopes
        audience = configuration.audience
        resources = configuration.resources
        // A DPoP-bound token is another token than a bearer one of the same grant.
        variant =
            configuration.dpop
            ? (configuration.grant.variant.map { $0 + ";" } ?? "") + "dpop" : configuration.grant.variant
        isMachineIdentity = Self.isMachineIdentity(configuration.grant)
        mayHoldBoundTokens = configuration.dpop || configuration.clientAuth.isMutualTLS
    }

    private static func isMachineIdentity(_ grant: Grant) -> Bool {
        switch grant {
        case .clientCredentials: return true
        // An assertion from a profile is as much a machine's as that profile's token is (an ID-JAG
        // for a person's ID token is the person's).
        case .jwtBearer(.session(_, _, let configuration)): return isMachineIdentity(configuration.grant)
        case .jwtBearer: return true
        case .refreshToken, .interactive: return false
        case .tokenExchange(let exchange):
            return [exchange.subject, exchange.actor].allSatisfy { source in
                switch source {
                case .none: return true
                case .secret: return false
                case .session(let key): return key.isMachineIdentity
                case .sessionIDToken: return false
                }
            }
        }
    }

    /// A length-prefixed text of every field (no two keys share one): what a dependent session's
    /// key records of this one.
    public var identity: String {
        let fields: [String?] =
            [environment, profile, issuer, tokenEndpoint, clientID, grant, audience, variant]
            + scopes.map { "scope:" + $0 } + resources.map { "resource:" + $0 }
        return fields.map { field in field.map { "\($0.utf8.count):\($0)" } ?? "-" }.joined(separator: ";")
    }

    /// `environment/profile` (no secrets).
    public var description: String { "\(environment)/\(profile)" }
}
