import FoundationEssentials
import TokenRelayLogging

/// A session's state and the store's entry: where it lives in the store, reading it, adopting what it holds,
/// forgetting it.
extension TokenManager {
    /// The session's key in the store: what the token means plus, for a `refresh_token` profile,
    /// the seed's fingerprint. The seed is resolved once per session; `resolvedSeed` is its value
    /// when it was resolved by this call.
    func resolveStoreKey(_ session: Session) async throws -> (key: StoreKey, resolvedSeed: String?) {
        if let known = session.storeKey { return (known, nil) }
        let resolved = try await resolveSeed(session.configuration)
        let storeKey = StoreKey(
            session: session.key, seedFingerprint: resolved.map { StoreKey.hex(Self.digest($0)) })
        session.storeKey = storeKey
        return (storeKey, resolved)
    }

    /// The configured seed of a `refresh_token` grant (`nil` for other grants).
    func resolveSeed(_ configuration: OAuthClientConfiguration) async throws -> String? {
        guard case .refreshToken(let seed) = configuration.grant else { return nil }
        return try await seed.resolve("the refresh_token seed")
    }

    /// Reads the session's entry and makes it the session's state.
    /// What is read is adopted unless the session was logged out meanwhile: the read predates the
    /// logout, and the session stays logged out.
    func reload(_ session: Session, _ storeKey: StoreKey) async throws {
        let generation = session.generation
        let stored = try await storeCall { try await store.load(storeKey) }
        guard session.generation == generation else { return }
        session.loaded = true
        adoptStored(stored, into: session)
    }

    /// The session's logout epoch in the store (see ``TokenStore/logoutEpoch(_:)``).
    func readLogoutEpoch(_ storeKey: StoreKey) async throws -> Int64 {
        try await storeCall { try await store.logoutEpoch(storeKey) }
    }

    /// A call to the store (`call`); a failure is reported as ``AuthError/fromStore(_:_:)`` says,
    /// with `failure` for one that is not the store's own.
    func storeCall<T>(_ failure: String = "the token store could not be read", _ call: () async throws -> T)
        async throws(AuthError) -> T
    {
        do {
            return try await call()
        } catch {
            throw .fromStore(error, failure)
        }
    }

    /// How much longer than its flight's own bound a renewal lease lasts: a holder that dies
    /// mid-request is taken over by the pid check at once; this margin only covers a holder that
    /// hangs (its lease then lapses).
    static let leaseMargin: TimeInterval = 30

    /// Takes what the store holds as the session's state: the same revision keeps the held token
    /// (and its stamp); another one replaces it; an entry gone (logged out, or refused, in another
    /// process) drops what this process held from the store. While a rotated refresh token could
    /// not be committed, the entry it replaced (same revision) is not adopted: it holds the spent one.
    func adoptStored(_ stored: StoredTokens?, into session: Session) {
        if let unsaved = session.unsavedRotation {
            guard stored?.revision != unsaved.storedRevision else {
                session.refreshToken = unsaved.refreshToken
                session.token = nil
                session.revision = stored?.revision
                session.invalidated = false
                session.tokenFromStore = false
                return
            }
            session.unsavedRotation = nil
        }
        guard let stored else {
            if session.revision != nil {
                session.revision = nil
                session.dpopKey = nil
                session.token = nil
                session.refreshToken = nil
                session.invalidated = false
                session.tokenFromStore = false
                session.identity = nil
                session.idToken = nil
            }
            return
        }
        if stored.revision == session.revision, session.token != nil || stored.accessToken == nil {
            session.invalidated = session.invalidated || stored.invalidated
            return
        }
        session.revision = stored.revision
        session.refreshToken = stored.refreshToken
        // The key the stored tokens are bound to (another process made it): proofs use it from now on.
        if session.configuration.dpop, let kept = stored.dpopKey {
            if let key = DPoPKey(stored: kept) {
                session.dpopKey = key
            } else {
                log.warn(
                    "\(session.key): the DPoP key in the store cannot be read; a new one is made at the next renewal")
                session.dpopKey = nil
            }
        }
        if let subject = stored.subject, session.identity?.rawSubject != subject {
            session.identity = LoginIdentity(subject: subject)
            // Another person's login (in another process): this process's ID token is not theirs.
            session.idToken = nil
        }
        // One registration for both, so the redactor rebuilds its matcher once.
        Redactor.shared.registerTokens([stored.refreshToken, stored.accessToken].compactMap { $0 })
        session.invalidated = stored.invalidated
        session.tokenFromStore = stored.accessToken != nil
        if let accessToken = stored.accessToken {
            var token = Token(
                accessToken: accessToken, tokenType: stored.tokenType, receivedAt: stored.receivedAt ?? clock.now,
                expiresAt: stored.expiresAt, refreshToken: stored.refreshToken, scope: stored.scope, version: nextID())
            token.dpopKey = session.configuration.dpop ? session.dpopKey : nil
            token.certificateBound = Token.isCertificateBound(accessToken, session.configuration)
            // A bound token whose key cannot be read is useless: renewed (with a new key).
            session.token = session.configuration.dpop && token.dpopKey == nil ? nil : token
        } else {
            session.token = nil
        }
    }

    /// Drops every token the session holds in memory (the store no longer has it).
    func forgetTokens(_ session: Session) {
        session.dpopKey = nil
        session.token = nil
        session.refreshToken = nil
        session.unsavedRotation = nil
        session.revision = nil
        session.tokenFromStore = false
        session.invalidated = false
        session.identity = nil
        session.idToken = nil
    }

    /// Forgets a refused refresh token (memory and store), unless another one replaced it.
    func dropRefreshState(_ session: Session, refused: String) async throws {
        guard session.refreshToken == nil || session.refreshToken == refused else { return }
        session.refreshToken = nil
        session.unsavedRotation = nil
        session.token = session.token.map {
            var token = Token(
                accessToken: $0.accessToken, tokenType: $0.tokenType, receivedAt: $0.receivedAt,
                expiresAt: $0.expiresAt, refreshToken: nil, scope: $0.scope, version: $0.version)
            token.dpopKey = $0.dpopKey
            token.certificateBound = $0.certificateBound
            return token
        }
        do {
            if let storeKey = session.storeKey { try await store.remove(storeKey) }
            session.revision = nil
        } catch {
            throw AuthError.storage("the refused refresh token could not be removed")
        }
    }

    /// The SHA-256 digest of `value` (consumed seeds are remembered by digest, not by value).
    static func digest(_ value: String) -> [UInt8] { LibCrypto.sha256(Array(value.utf8)) }
}

extension AuthError {
    /// What a failed store call is reported as: the store's own ``AuthError`` as it is (a store that
    /// cannot be used as configured, say), anything else as ``storage(_:)`` saying `failure`.
    static func fromStore(_ error: any Error, _ failure: String) -> AuthError {
        (error as? AuthError) ?? .storage(failure)
    }
}
