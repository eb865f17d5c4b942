import FoundationEssentials

/// One row of a shared tier: a session's access token, sealed with the store key, under the
/// SHA-256 of the session's key (SPEC §11). Holds no name, URL or token in clear.
public struct SharedRow: Sendable, Equatable {
    /// The SHA-256 of the session's key (``StoreKey/id``, 32 bytes).
    public var id: [UInt8]
    /// ``SharedTokenPayload`` sealed with the store key (AES-256-GCM, `id` as associated data).
    public var sealed: [UInt8]
    /// The token's absolute expiry (kept in clear so that a newer token is never replaced by an
    /// older one), `nil` when the server gave none.
    public var expiresAt: Date?

    /// Creates a row.
    public init(id: [UInt8], sealed: [UInt8], expiresAt: Date?) {
        self.id = id
        self.sealed = sealed
        self.expiresAt = expiresAt
    }
}

/// What `status` shows of a shared tier.
public struct SharedTierInfo: Sendable, Equatable {
    /// `postgres`.
    public var type: String
    /// `available` (answered last time, or not used yet) or `unavailable`.
    public var state: String
    /// Since when it is unavailable.
    public var since: Date?

    /// Creates a description.
    public init(type: String, state: String, since: Date? = nil) {
        self.type = type
        self.state = state
        self.since = since
    }
}

/// A shared tier failed, refused, or was slower than its timeout: the host acts on its own.
public struct SharedTierUnavailable: Error, Sendable, CustomStringConvertible {
    /// Why (never a token, key or password).
    public let reason: String

    /// Creates the error.
    public init(_ reason: String) { self.reason = reason }

    public var description: String { "the shared tier is unavailable: \(reason)" }
}

/// A fleet-wide renewal lock on one row, held until released (or until its holder's connection
/// drops, e.g. because the holder died).
public protocol SharedRenewalLock: Sendable {
    /// Releases the lock (never waits).
    func release()
}

/// A store that many hosts share (SPEC §11): access tokens only, sealed rows keyed by hash, one
/// renewal per session across the fleet. Every member throws ``SharedTierUnavailable`` when the
/// tier failed or took longer than its timeout; none waits longer than that (except
/// ``lock(_:deadline:)``, bounded by its deadline). Implementations must be safe to call
/// concurrently.
public protocol SharedTokenTier: Sendable {
    /// What `status` shows.
    var info: SharedTierInfo { get }
    /// Whether any row changed (a renewal, invalidation or logout on any host) since the last
    /// call, as far as the tier told this host. Must never wait.
    func changedElsewhere() -> Bool
    /// The row with this id, if any.
    func read(_ id: [UInt8]) async throws -> SharedRow?
    /// Stores `row` unless the tier holds a token for that id that expires later; tells the fleet.
    func publish(_ row: SharedRow) async throws
    /// Deletes the row only while it still holds exactly `sealed` (compare-and-delete); tells the
    /// fleet. Returns whether it deleted.
    func delete(_ id: [UInt8], ifSealed sealed: [UInt8]) async throws -> Bool
    /// Deletes the row whatever it holds (`logout`); tells the fleet.
    func delete(_ id: [UInt8]) async throws
    /// Takes the fleet-wide renewal lock of the row, waiting for another holder (without
    /// spinning) until `deadline`; `nil` when the deadline passed first.
    func lock(_ id: [UInt8], deadline: Date) async throws -> (any SharedRenewalLock)?
}

/// What a row seals: an access token and what describes it, never a refresh token.
struct SharedTokenPayload: Equatable {
    var accessToken: String
    var tokenType: String
    var scope: String?
    var receivedAt: Date?
    var expiresAt: Date?

    /// Length-prefixed fields (`<byte count>:<value>;`, `-;` for none) after a version tag.
    var encoded: [UInt8] {
        var text = "tokenrelay-shared-v1;"
        let fields: [String?] = [
            accessToken, tokenType, scope, receivedAt.map { String($0.timeIntervalSince1970) },
            expiresAt.map { String($0.timeIntervalSince1970) },
        ]
        for field in fields {
            if let field { text += "\(field.utf8.count):\(field);" } else { text += "-;" }
        }
        return Array(text.utf8)
    }

    /// Parses what ``encoded`` made; `nil` for anything else.
    init?(encoded bytes: [UInt8]) {
        let prefix = Array("tokenrelay-shared-v1;".utf8)
        guard bytes.starts(with: prefix) else { return nil }
        var index = prefix.count
        var fields: [String?] = []
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "-") {
                guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: ";") else { return nil }
                fields.append(nil)
                index += 2
                continue
            }
            guard let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")),
                let length = Int(String(decoding: bytes[index..<colon], as: UTF8.self)), length >= 0,
                colon + 1 + length < bytes.count, bytes[colon + 1 + length] == UInt8(ascii: ";")
            else { return nil }
            fields.append(String(decoding: bytes[(colon + 1)..<(colon + 1 + length)], as: UTF8.self))
            index = colon + 2 + length
        }
        guard fields.count == 5, let token = fields[0], let type = fields[1] else { return nil }
        accessToken = token
        tokenType = type
        scope = fields[2]
        receivedAt = fields[3].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
        expiresAt = fields[4].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }

    init(accessToken: String, tokenType: String, scope: String?, receivedAt: Date?, expiresAt: Date?) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.scope = scope
        self.receivedAt = receivedAt
        self.expiresAt = expiresAt
    }
}
