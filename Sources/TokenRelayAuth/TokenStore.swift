import FoundationEssentials
import Synchronization

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
    /// OpenID Connect: the validated ID token's `sub` as the server sent it (who logged in), so
    /// that a renewal in any process can tell when the server answers for another person.
    public var subject: String?
    /// DPoP: the session's key (``DPoPKey/stored``), kept sealed like the refresh token.
    var dpopKey: String?
    /// Set by the store on load: the entry's revision (bumped by every save).
    public var revision: Int64
    /// Set by the store on load: an invalidation was recorded after the last save, so the access
    /// token must be renewed (by whichever process uses it next).
    public var invalidated: Bool

    /// Creates an entry.
    public init(
        accessToken: String?, tokenType: String = "Bearer", receivedAt: Date? = nil, expiresAt: Date? = nil,
        refreshToken: String? = nil, scope: String? = nil, revision: Int64 = 0, invalidated: Bool = false,
        subject: String? = nil, dpopKey: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.receivedAt = receivedAt
        self.expiresAt = expiresAt
        self.refreshToken = refreshToken
        self.scope = scope
        self.revision = revision
        self.invalidated = invalidated
        self.subject = subject
        self.dpopKey = dpopKey
    }

    /// Redacted: never shows a token.
    public var description: String {
        "StoredTokens(accessToken: \(accessToken == nil ? "none" : "[REDACTED]"), "
            + "refreshToken: \(refreshToken == nil ? "none" : "[REDACTED]"), revision: \(revision))"
    }
}

/// Where a session lives in a store: what the token means (``SessionKey``) plus, for
/// `refresh_token` profiles, the SHA-256 fingerprint of the configured seed, so that a new seed
/// starts a new session (SPEC §5.6). ``id`` is the SHA-256 of all of it: two config files that
/// describe the same client the same way share a session. Contains no secret.
public struct StoreKey: Sendable, Hashable, CustomStringConvertible {
    /// The session's meaning.
    public let session: SessionKey
    /// Hex SHA-256 of the `refresh_token` seed, if the grant has one.
    public let seedFingerprint: String?
    /// Hex SHA-256 of the canonical form of everything above (the store's row id). Computed when a
    /// store is used, not when a session is registered: hashing loads libcrypto, which a start
    /// that never touches a store does not need to map.
    public var id: String { StoreKey.hex(LibCrypto.sha256(Array(canonical.utf8))) }

    /// The key of `session` (with the fingerprint of its seed, if any).
    public init(session: SessionKey, seedFingerprint: String? = nil) {
        self.session = session
        self.seedFingerprint = seedFingerprint
    }

    /// The length-prefixed canonical form of everything above; ``id`` is its digest. Length
    /// prefixes, so that no two different keys share a canonical form.
    private var canonical: String {
        var canonical = "tokenrelay-session-v1"
        let fields: [String?] =
            [
                session.environment, session.profile, session.issuer, session.tokenEndpoint, session.clientID,
                session.grant, session.audience, seedFingerprint,
            ] + session.scopes.map { "scope:" + $0 } + session.resources.map { "resource:" + $0 }
            // Only grants with a variant (token exchange) add it: every other key stays as it was.
            + (session.variant.map { ["variant:" + $0] } ?? [])
        for field in fields {
            if let field { canonical += ";\(field.utf8.count):\(field)" } else { canonical += ";-" }
        }
        return canonical
    }

    /// `environment/profile` (no secrets).
    public var description: String { session.description }

    /// Lower-case hex of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What a store says about itself in `status`.
public struct TokenStoreInfo: Sendable, Equatable {
    /// `memory` or `sqlite`.
    public var type: String
    /// The database file, for SQLite.
    public var path: String?
    /// Whether tokens are sealed at rest.
    public var encrypted: Bool
    /// The schema version of the opened file (`nil`: memory, or not opened yet).
    public var schemaVersion: Int?
    /// The shared tier beside the store (`store.shared`), if any.
    public var shared: SharedTierInfo?
    /// What sealed the opened store (``StoreKeyKind``'s raw value: `secret_service`,
    /// `encryption_key`); `nil` when it is plain or not opened yet.
    public var key: String?
    /// Which it is, in a sentence ("sealed with a key from the secret service", "plain text: no
    /// secret service here (…); set store.encryption_key"); `nil` until the store is opened.
    public var note: String?

    /// Creates a description.
    public init(
        type: String, path: String? = nil, encrypted: Bool = false, schemaVersion: Int? = nil,
        shared: SharedTierInfo? = nil, key: String? = nil, note: String? = nil
    ) {
        self.type = type
        self.path = path
        self.encrypted = encrypted
        self.schemaVersion = schemaVersion
        self.shared = shared
        self.key = key
        self.note = note
    }
}

/// Why a lease is held (SPEC §5.6: one renewal, and one login, per session across processes).
public enum LeasePurpose: String, Sendable {
    /// A token acquisition or renewal.
    case renewal
    /// An interactive login.
    case login
    /// A client registration (SPEC §9.4: one per issuer, however many processes).
    case registration
}

/// A lease held on one session. Release it with ``TokenStore/releaseLease(_:)`` (or use
/// ``TokenStore/withLease(_:purpose:deadline:lifetime:isolation:_:)``).
public struct StoreLease: Sendable, Hashable {
    /// The session.
    public let key: StoreKey
    /// Identifies this holding (unique per acquisition).
    public let owner: Int64
    /// Why it is held.
    public let purpose: LeasePurpose
}

/// Persists tokens per session and coordinates the processes that share it (SPEC §5.6).
///
/// `save` replaces a session's entry atomically: a rotated refresh token and its access token are
/// committed together or not at all, and a recorded invalidation is cleared. A lease gives one
/// holder (across every process sharing the store) the right to renew (or log in) a session; it
/// is taken and released in short transactions, never held open across a network call, and a
/// lease whose holder died or whose lifetime passed is taken over. Implementations must be safe
/// to call concurrently. The synchronous members (`changedElsewhere`, `releaseLease`) must not block.
public protocol TokenStore: Sendable {
    /// What `status` shows about the store.
    var info: TokenStoreInfo { get }
    /// Opens the store now (resolving its key), so that a bad file or key is reported; the other
    /// members open it on first use anyway.
    func open() async throws
    /// Starts opening the store in the background, for a one-shot command that knows it will
    /// read it, and returns without waiting for the opening (it may load the store's library on
    /// the caller's thread first); a failure is left for the first use to report.
    func prepare()
    /// The session's entry, if any.
    func load(_ key: StoreKey) async throws -> StoredTokens?
    /// Replaces the session's entry atomically (clearing a recorded invalidation) and returns its
    /// new revision; with `logoutEpoch`, only if the session was not logged out since that epoch
    /// (``logoutEpoch(_:)``), checked in the same transaction: `nil` then, and nothing is written
    /// (a renewal finishing after a `logout` in any process never brings the session back).
    func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64?
    /// Removes the session's entry (everywhere: every process sharing the store sees it gone).
    func remove(_ key: StoreKey) async throws
    /// How many times the session was logged out (`0`: never); read before a renewal and passed
    /// to ``save(_:for:logoutEpoch:)``.
    func logoutEpoch(_ key: StoreKey) async throws -> Int64
    /// Logs the session out everywhere: removes its entry and renewal counts and bumps its logout
    /// epoch in one transaction, so that a renewal already under way elsewhere commits nothing.
    func logOut(_ key: StoreKey) async throws
    /// Records that the session's access token must be renewed; with `revision`, only while the
    /// stored entry is still that revision and not invalidated yet (a 401 on a token another
    /// process already replaced or invalidated changes nothing). Returns whether it changed the
    /// entry.
    @discardableResult
    func recordInvalidation(_ key: StoreKey, revision: Int64?) async throws -> Bool
    /// Whether another process changed the store since the last call (SQLite: one
    /// `PRAGMA data_version`). `false` for a store no other process shares. Must never wait (it is
    /// on every request's path): when it cannot tell at once, `true`.
    func changedElsewhere() -> Bool
    /// Takes the session's lease, waiting (without spinning) while another live holder has it,
    /// until `deadline` (then ``AuthError/timeout``). The lease lapses by itself at `expiresAt`
    /// if it is never released.
    func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    /// Releases a lease (a lease already taken over is left alone).
    func releaseLease(_ lease: StoreLease)
    /// Whether a `refresh_token` seed with this fingerprint was ever sent by any process.
    func isSeedSpent(_ fingerprint: String) async throws -> Bool
    /// Records that the seed with this fingerprint is being sent (it is never sent again).
    func markSeedSpent(_ fingerprint: String) async throws
    /// Records an unexplained renewal (a 401 recovery) at `date` and returns how many the session
    /// had within `window` before it, across processes (not counting this one).
    func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) async throws -> Int
    /// Forgets the session's unexplained renewals (`token-invalidate`).
    func clearUnexplainedRenewals(_ key: StoreKey) async throws
    /// The client registration kept for `issuer` (SPEC §9.4), if any.
    func loadRegistration(issuer: String) async throws -> ClientRegistration?
    /// Keeps `registration` for its issuer (replacing any), sealed like a refresh token.
    func saveRegistration(_ registration: ClientRegistration) async throws
    /// Forgets the registration kept for `issuer` (refused or expired).
    func removeRegistration(issuer: String) async throws
}

extension TokenStore {
    /// Nothing to open.
    public func open() async throws {}

    /// Nothing to prepare.
    public func prepare() {}

    /// Replaces the session's entry atomically, whatever happened to it before; returns its new
    /// revision.
    @discardableResult
    public func save(_ tokens: StoredTokens, for key: StoreKey) async throws -> Int64 {
        guard let revision = try await save(tokens, for: key, logoutEpoch: nil) else {
            throw AuthError.storage("the store refused an unconditional save")
        }
        return revision
    }

    /// Runs `body` holding the session's lease (see ``acquireLease(_:purpose:deadline:expiresAt:)``):
    /// waits for it until `deadline`, holds it for at most `lifetime` (choose one longer than
    /// anything `body` waits for, e.g. its token request's bound), and releases it when `body`
    /// returns or throws. Another process waiting for the lease re-reads the store afterwards.
    public func withLease<T>(
        _ key: StoreKey, purpose: LeasePurpose, deadline: Date, lifetime: Duration,
        isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T
    ) async throws -> T {
        let seconds = Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18
        let lease = try await acquireLease(
            key, purpose: purpose, deadline: deadline, expiresAt: Date().addingTimeInterval(seconds))
        defer { releaseLease(lease) }
        return try await body()
    }
}

/// A store that lives as long as the process (`store: {type: memory}`): no other process shares
/// it, so its lease only orders holders within this process.
public final class InMemoryTokenStore: TokenStore {
    private struct State {
        var entries: [StoreKey: StoredTokens] = [:]
        /// By session and purpose: a login's lease and a renewal's are apart (as in the SQLite store).
        var leases: [LeaseSlot: Int64] = [:]
        var lastOwner: Int64 = 0
        var spentSeeds: Set<String> = []
        var unexplained: [StoreKey: [Date]] = [:]
        var logouts: [StoreKey: Int64] = [:]
        var registrations: [String: ClientRegistration] = [:]
    }

    private struct LeaseSlot: Hashable {
        let key: StoreKey
        let purpose: LeasePurpose
    }

    private let state = Mutex(State())

    /// Creates an empty store.
    public init() {}

    public var info: TokenStoreInfo { TokenStoreInfo(type: "memory") }

    public func load(_ key: StoreKey) async throws -> StoredTokens? { state.withLock { $0.entries[key] } }

    public func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64? {
        state.withLock { state in
            if let logoutEpoch, state.logouts[key, default: 0] != logoutEpoch { return nil }
            var entry = tokens
            entry.revision = (state.entries[key]?.revision ?? 0) + 1
            entry.invalidated = false
            state.entries[key] = entry
            return entry.revision
        }
    }

    public func remove(_ key: StoreKey) async throws { state.withLock { $0.entries[key] = nil } }

    public func logoutEpoch(_ key: StoreKey) async throws -> Int64 { state.withLock { $0.logouts[key, default: 0] } }

    public func logOut(_ key: StoreKey) async throws {
        state.withLock { state in
            state.entries[key] = nil
            state.unexplained[key] = nil
            state.logouts[key, default: 0] += 1
        }
    }

    @discardableResult
    public func recordInvalidation(_ key: StoreKey, revision: Int64?) throws -> Bool {
        state.withLock { state in
            guard var entry = state.entries[key] else { return false }
            if let revision, revision != entry.revision || entry.invalidated { return false }
            entry.invalidated = true
            state.entries[key] = entry
            return true
        }
    }

    public func changedElsewhere() -> Bool { false }

    public func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    {
        var delay = 0.005
        while true {
            let owner = state.withLock { state -> Int64? in
                let slot = LeaseSlot(key: key, purpose: purpose)
                guard state.leases[slot] == nil else { return nil }
                state.lastOwner += 1
                state.leases[slot] = state.lastOwner
                return state.lastOwner
            }
            if let owner { return StoreLease(key: key, owner: owner, purpose: purpose) }
            try await LeaseWait.pause(&delay, deadline: deadline)
        }
    }

    public func releaseLease(_ lease: StoreLease) {
        state.withLock { state in
            let slot = LeaseSlot(key: lease.key, purpose: lease.purpose)
            if state.leases[slot] == lease.owner { state.leases[slot] = nil }
        }
    }

    public func isSeedSpent(_ fingerprint: String) async throws -> Bool {
        state.withLock { $0.spentSeeds.contains(fingerprint) }
    }

    public func markSeedSpent(_ fingerprint: String) async throws {
        _ = state.withLock { $0.spentSeeds.insert(fingerprint) }
    }

    public func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) throws -> Int {
        state.withLock { state in
            var dates = state.unexplained[key, default: []].filter { date.timeIntervalSince($0) < window }
            let before = dates.count
            dates.append(date)
            state.unexplained[key] = dates
            return before
        }
    }

    public func clearUnexplainedRenewals(_ key: StoreKey) throws { state.withLock { $0.unexplained[key] = nil } }

    public func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        state.withLock { $0.registrations[issuer] }
    }

    public func saveRegistration(_ registration: ClientRegistration) async throws {
        state.withLock { $0.registrations[registration.issuer] = registration }
    }

    public func removeRegistration(issuer: String) async throws { state.withLock { $0.registrations[issuer] = nil } }
}

/// The wait between two looks at a lease held by someone else: growing from 5 ms to 100 ms, never
/// past the waiter's deadline.
enum LeaseWait {
    static func pause(_ delay: inout Double, deadline: Date) async throws {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { throw AuthError.timeout }
        try await Task.sleep(for: .seconds(min(delay, remaining)))
        delay = min(delay * 2, 0.1)
    }
}
