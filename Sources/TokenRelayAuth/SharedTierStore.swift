import FoundationEssentials
import Synchronization
import TokenRelayLogging

/// The host's store with a shared tier beside it (SPEC §11): what the token manager sees as its
/// store. Sessions of the shared grants read the host's store, then the tier (a token found there
/// is copied into the host's store); their renewals take the host's lease, then the tier's
/// fleet-wide lock; the tokens they commit are published, sealed, to the tier. Everything else
/// (refresh tokens, logins, seeds, other grants) stays in the host's store.
///
/// The tier failing never fails a call: ``SharedTierUnavailable`` is caught here and the host acts
/// on its own (the tier logs and reports it).
public final class SharedTierStore: TokenStore {
    private let host: any TokenStore
    private let tier: any SharedTokenTier
    private let encryptionKey: SecretProvider
    private let cipher = Mutex<StoreCipher?>(nil)
    /// Fleet locks held with host leases. Guarded by the mutex.
    private let locks = Mutex<[StoreLease: any SharedRenewalLock]>([:])
    /// Per session, the SHA-256 of the last token seen in the tier: a row gone that held it was
    /// deleted by another host (invalidated or logged out). Guarded by the mutex.
    private let seen = Mutex<[StoreKey: [UInt8]]>([:])

    /// `host` with `tier` beside it; rows are sealed with the store key `encryptionKey` (32 bytes,
    /// base64 or hex; required).
    public init(host: any TokenStore, tier: any SharedTokenTier, encryptionKey: SecretProvider) {
        self.host = host
        self.tier = tier
        self.encryptionKey = encryptionKey
    }

    public var info: TokenStoreInfo {
        var info = host.info
        info.shared = tier.info
        return info
    }

    public func open() async throws { try await host.open() }

    public func prepare() { host.prepare() }

    /// Whether the session's access tokens may live in the tier: a machine identity
    /// (`client_credentials`, `jwt_bearer`, a `token_exchange` of such tokens: never a person's
    /// login or a refresh token, nor an exchange of one), and no seed. DPoP- or certificate-bound
    /// tokens never are (see ``isShareable(_:)``).
    func isShared(_ key: StoreKey) -> Bool {
        key.session.isMachineIdentity && !key.session.mayHoldBoundTokens && key.seedFingerprint == nil
    }

    /// Bearer tokens only: a token bound to a key (DPoP, mTLS) is useless, and dangerous, elsewhere.
    static func isShareable(_ tokenType: String) -> Bool { tokenType.lowercased() == "bearer" }

    // MARK: - Reads

    public func load(_ key: StoreKey) async throws -> StoredTokens? {
        let local = try await host.load(key)
        guard isShared(key) else { return local }
        let id = Self.rowID(key)
        let row: SharedRow?
        do {
            row = try await tier.read(id)
        } catch {
            return local
        }
        guard let row else {
            // Gone from the tier while this host holds the token last seen there: another host
            // invalidated it (or logged out). The host's store records it, so every process renews.
            if let local, let token = local.accessToken, !local.invalidated, seenDigest(key) == Self.digest(token) {
                forgetSeen(key)
                log.info("\(key)'s token was withdrawn by another host of the fleet")
                _ = try await host.recordInvalidation(key, revision: local.revision)
                return try await host.load(key)
            }
            return local
        }
        guard let payload = try? await open(row) else {
            log.debug("a shared row of \(key) could not be opened (sealed under another store key?)")
            return local
        }
        remember(key, payload.accessToken)
        let now = Date()
        guard payload.accessToken != local?.accessToken, Self.isShareable(payload.tokenType),
            payload.expiresAt.map({ $0 > now }) ?? true
        else { return local }
        let localUsable =
            local?.accessToken != nil && local?.invalidated == false && (local?.expiresAt.map { $0 > now } ?? true)
        let later = (payload.expiresAt ?? .distantFuture) > (local?.expiresAt ?? .distantPast)
        guard !localUsable || later else { return local }
        let copy = StoredTokens(
            accessToken: payload.accessToken, tokenType: payload.tokenType, receivedAt: payload.receivedAt,
            expiresAt: payload.expiresAt, refreshToken: local?.refreshToken, scope: payload.scope)
        let epoch = try await host.logoutEpoch(key)
        guard try await host.save(copy, for: key, logoutEpoch: epoch) != nil else { return try await host.load(key) }
        log.debug("\(key): token taken from the shared tier")
        return try await host.load(key)
    }

    // MARK: - Writes

    public func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64? {
        let revision = try await host.save(tokens, for: key, logoutEpoch: logoutEpoch)
        guard revision != nil, isShared(key), let token = tokens.accessToken, Self.isShareable(tokens.tokenType) else {
            return revision
        }
        let payload = SharedTokenPayload(
            accessToken: token, tokenType: tokens.tokenType, scope: tokens.scope, receivedAt: tokens.receivedAt,
            expiresAt: tokens.expiresAt)
        let id = Self.rowID(key)
        do {
            guard let sealed = try await seal(payload, id: id) else { return revision }
            try await tier.publish(SharedRow(id: id, sealed: sealed, expiresAt: tokens.expiresAt))
            remember(key, token)
        } catch {
            log.debug("\(key): the new token was not shared: \(error)")
        }
        return revision
    }

    public func remove(_ key: StoreKey) async throws { try await host.remove(key) }

    public func logoutEpoch(_ key: StoreKey) async throws -> Int64 { try await host.logoutEpoch(key) }

    public func logOut(_ key: StoreKey) async throws {
        try await host.logOut(key)
        guard isShared(key) else { return }
        forgetSeen(key)
        try? await tier.delete(Self.rowID(key))
    }

    /// Records the invalidation in the host's store, then deletes the tier's row only while it
    /// still holds the rejected token (compare-and-delete on the sealed bytes): a 401 on a token
    /// the fleet already replaced deletes nothing.
    @discardableResult
    public func recordInvalidation(_ key: StoreKey, revision: Int64?) async throws -> Bool {
        guard isShared(key) else { return try await host.recordInvalidation(key, revision: revision) }
        let before = try await host.load(key)
        let changed = try await host.recordInvalidation(key, revision: revision)
        guard let before, let rejected = before.accessToken, revision == nil || (changed && before.revision == revision)
        else { return changed }
        let id = Self.rowID(key)
        do {
            guard let row = try await tier.read(id), let payload = try await open(row), payload.accessToken == rejected
            else { return changed }
            if try await tier.delete(id, ifSealed: row.sealed) {
                forgetSeen(key)
                log.debug("\(key): the rejected token was withdrawn from the shared tier")
            }
        } catch {
            log.debug("\(key): the invalidation was not shared: \(error)")
        }
        return changed
    }

    public func changedElsewhere() -> Bool {
        let hostChanged = host.changedElsewhere()
        let tierChanged = tier.changedElsewhere()
        return hostChanged || tierChanged
    }

    // MARK: - Leases

    /// The host's lease, then (renewals of shared sessions) the fleet's lock, waited for no longer
    /// than half of what remains to `deadline`: a holder elsewhere that hangs makes this host renew
    /// on its own rather than fail its callers. A holder that died releases the lock at once (its
    /// connection drops). Whoever gets the lock after a renewal reads the renewed token.
    public func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    {
        let lease = try await host.acquireLease(key, purpose: purpose, deadline: deadline, expiresAt: expiresAt)
        guard purpose == .renewal, isShared(key) else { return lease }
        let bound = Date().addingTimeInterval(max(0, deadline.timeIntervalSinceNow / 2))
        do {
            log.debug("\(key): waiting for the fleet's renewal lock")
            if let lock = try await tier.lock(Self.rowID(key), deadline: bound) {
                log.debug("\(key): took the fleet's renewal lock")
                locks.withLock { $0[lease] = lock }
            } else {
                log.info("\(key): another host's renewal outlasted half of this one's bound; renewing on its own")
            }
        } catch {
            // Unavailable: the tier said so; the host renews on its own.
        }
        return lease
    }

    public func releaseLease(_ lease: StoreLease) {
        locks.withLock { $0.removeValue(forKey: lease) }?.release()
        host.releaseLease(lease)
    }

    public func isSeedSpent(_ fingerprint: String) async throws -> Bool { try await host.isSeedSpent(fingerprint) }

    public func markSeedSpent(_ fingerprint: String) async throws { try await host.markSeedSpent(fingerprint) }

    public func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) async throws -> Int {
        try await host.recordUnexplainedRenewal(key, at: date, window: window)
    }

    public func clearUnexplainedRenewals(_ key: StoreKey) async throws { try await host.clearUnexplainedRenewals(key) }

    // Registrations are never shared (SPEC §11): the host's store keeps them.
    public func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        try await host.loadRegistration(issuer: issuer)
    }

    public func saveRegistration(_ registration: ClientRegistration) async throws {
        try await host.saveRegistration(registration)
    }

    public func removeRegistration(issuer: String) async throws { try await host.removeRegistration(issuer: issuer) }

    // MARK: - Sealing

    /// The row id of a session: the SHA-256 of its key (``StoreKey/id``), no name or URL.
    static func rowID(_ key: StoreKey) -> [UInt8] { PostgresSharedTier.bytes(hex: key.id) ?? [] }

    static func digest(_ token: String) -> [UInt8] { LibCrypto.sha256(Array(token.utf8)) }

    private func storeCipher() async throws -> StoreCipher {
        if let known = cipher.withLock({ $0 }) { return known }
        guard let bytes = SQLiteTokenStore.decodeKey(try await encryptionKey.resolve()),
            let made = StoreCipher(key: bytes)
        else { throw SharedTierUnavailable("the store key is not 32 bytes in base64 or hex") }
        cipher.withLock { $0 = made }
        return made
    }

    private func seal(_ payload: SharedTokenPayload, id: [UInt8]) async throws -> [UInt8]? {
        try await storeCipher().seal(payload.encoded, associatedData: id)
    }

    private func open(_ row: SharedRow) async throws -> SharedTokenPayload? {
        guard let plain = try await storeCipher().open(row.sealed, associatedData: row.id) else { return nil }
        return SharedTokenPayload(encoded: plain)
    }

    private func remember(_ key: StoreKey, _ token: String) {
        let digest = Self.digest(token)
        seen.withLock { $0[key] = digest }
    }

    private func seenDigest(_ key: StoreKey) -> [UInt8]? { seen.withLock { $0[key] } }

    private func forgetSeen(_ key: StoreKey) { _ = seen.withLock { $0.removeValue(forKey: key) } }
}
