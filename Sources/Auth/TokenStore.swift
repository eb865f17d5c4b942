import Foundation

/// What a store keeps for one session. Its description never shows a token.
public struct StoredTokens: Sendable, Equatable, CustomStringConvertible {
    /// The access token, if one is held.
    public var accessToken: String?
    /// Its type.
    public var tokenType: String
    /// When it was received.
    public var receivedAt: Date?
    /// Its absolute expiry (nil: unknown).
    public var expiresAt: Date?
    /// The current refresh token, if any.
    public var refreshToken: String?
    /// The granted scope.
    public var scope: String?

    /// Creates an entry.
    public init(
        accessToken: String?, tokenType: String = "Bearer", receivedAt: Date? = nil, expiresAt: Date? = nil,
        refreshToken: String? = nil, scope: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.receivedAt = receivedAt
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
        self.scope = scope
    }

    /// Redacted: never shows a token.
    public var description: String {
        "StoredTokens(accessToken: \(accessToken == nil ? "none" : "[REDACTED]"), "
            + "refreshToken: \(refreshToken == nil ? "none" : "[REDACTED]"))"
    }
}

/// Persists tokens per session. `save` replaces a session's entry atomically: a rotated refresh
/// token and its access token are committed together or not at all. Implementations must be safe
/// to call concurrently.
public protocol TokenStore: Sendable {
    /// The session's entry, if any.
    func load(_ key: SessionKey) async throws -> StoredTokens?
    /// Replaces the session's entry atomically.
    func save(_ tokens: StoredTokens, for key: SessionKey) async throws
    /// Removes the session's entry.
    func remove(_ key: SessionKey) async throws
}

/// A store that lives as long as the process (`store: memory`).
public actor InMemoryTokenStore: TokenStore {
    private var entries: [SessionKey: StoredTokens] = [:]

    /// Creates an empty store.
    public init() {}

    /// The session's entry, if any.
    public func load(_ key: SessionKey) async throws -> StoredTokens? { entries[key] }

    /// Replaces the session's entry.
    public func save(_ tokens: StoredTokens, for key: SessionKey) async throws { entries[key] = tokens }

    /// Removes the session's entry.
    public func remove(_ key: SessionKey) async throws { entries[key] = nil }
}
