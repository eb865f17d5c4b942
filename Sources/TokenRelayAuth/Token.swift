import FoundationEssentials

/// An access token with what the manager knows about it. Its description never shows a token.
public struct Token: Sendable, Equatable, CustomStringConvertible {
    /// The access token (registered with the redactor on receipt).
    public let accessToken: String
    /// The token type as the server spelled it (always some case of `Bearer`).
    public let tokenType: String
    /// When it was received, on the manager's clock.
    public let receivedAt: Date
    /// Absolute expiry computed at receipt; `nil` when the server gave no `expires_in`.
    public let expiresAt: Date?
    /// The refresh token in effect after this token was obtained, if any.
    public let refreshToken: String?
    /// The granted scope, if the server said.
    public let scope: String?
    /// A number unique to this token within the manager; used as the ``CredentialStamp``.
    public let version: UInt64
    /// DPoP: the key the token is bound to (proofs for its requests are signed with it).
    var dpopKey: DPoPKey?

    /// Mutual TLS (RFC 8705 §3): the token is bound to the client certificate, which the
    /// profile's API requests then present too.
    var certificateBound = false

    /// Whether the token is bound to a key (DPoP) or a client certificate (mutual TLS): useless,
    /// and refused, outside tokenrelay.
    public var isBound: Bool { dpopKey != nil || certificateBound }

    /// Whether `accessToken` of a session configured as `configuration` is bound to its client
    /// certificate: `mtls_bound: true`, or a JWT access token whose `cnf` has `x5t#S256` (read
    /// without verification: it only decides whether to present the client's own certificate).
    static func isCertificateBound(_ accessToken: String, _ configuration: OAuthClientConfiguration) -> Bool {
        guard configuration.clientAuth.isMutualTLS else { return false }
        if configuration.mtlsBound { return true }
        guard let jws = try? CompactJWS.parse(accessToken),
            let claims = try? TokenResponseParser.jsonObject(jws.payload)
        else { return false }
        return claims["cnf"]?["x5t#S256"]?.stringValue != nil
    }

    /// Creates a token record.
    public init(
        accessToken: String, tokenType: String = "Bearer", receivedAt: Date, expiresAt: Date?,
        refreshToken: String? = nil, scope: String? = nil, version: UInt64
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.receivedAt = receivedAt
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
        self.scope = scope
        self.version = version
    }

    /// Whether the token should be renewed at `now`: inside the smaller of `skew` and half the
    /// token's lifetime before its expiry. Tokens of unknown expiry never need renewal by time.
    public func needsRenewal(at now: Date, skew: Duration) -> Bool {
        guard let expiresAt else { return false }
        let lifetime = max(0, expiresAt.timeIntervalSince(receivedAt))
        let margin = min(skew.timeInterval, lifetime / 2)
        return now >= expiresAt.addingTimeInterval(-margin)
    }

    /// Whether the token stays valid for at least `duration` after `now`. Tokens of unknown expiry
    /// always do (nothing says otherwise; a 401 invalidates them).
    public func isValid(for duration: Duration, at now: Date) -> Bool {
        guard let expiresAt else { return true }
        return expiresAt.timeIntervalSince(now) >= duration.timeInterval
    }

    /// Redacted: shows the version and expiry, never the token.
    public var description: String {
        "Token(version: \(version), type: \(tokenType), expiresAt: \(expiresAt.map { "\($0)" } ?? "unknown"), "
            + "refreshable: \(refreshToken != nil), accessToken: [REDACTED])"
    }
}
