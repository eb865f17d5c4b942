import FoundationEssentials
import TokenRelayLogging

/// A commit that failed (the store's write lock held past the busy timeout by another program, a
/// disk failure) after the token endpoint rotated the refresh token: the old one is spent at the
/// server, so the new one must not be lost. It is kept in memory and committed again on the next
/// use of the session (under its lease, before anything is sent) and at close.
struct UnsavedCommit {
    /// The rotated refresh token.
    let refreshToken: String
    /// The revision of the entry that still holds the spent refresh token (`nil`: no entry).
    let storedRevision: Int64?
    /// What the failed commit was to write.
    let stored: StoredTokens
    /// The token it was to give callers once committed.
    let token: Token
    /// The logout epoch the commit was conditioned on (a logout since then wins).
    let logoutEpoch: Int64?
}

extension TokenManager {
    /// Builds the token, commits it (with the rotated or kept refresh token) to the store, and only
    /// then makes it the session's refresh state. A store failure fails the renewal but keeps the
    /// rotated refresh token in memory (the old one is already spent at the server).
    ///
    /// A logout since `logoutEpoch` (in any process: the store refuses the save) or since
    /// `generation` (in this one, while the save was under way) wins: nothing of the response is
    /// kept, its tokens are revoked, and the caller gets ``AuthError/loggedOut``. Which of these
    /// holds is ``RenewalFlight/committed(_:_:loggedOut:)``, as for ``commitUnsaved(_:_:)``.
    /// `subject` is the validated ID token's `sub` (OpenID Connect), kept with the tokens; `nil`
    /// keeps the one the session had. `signedWith`: the DPoP key that signed the token request
    /// (`nil`: the session's).
    func commit(
        _ response: TokenResponse, previousRefreshToken: String?, session: Session, storeKey: StoreKey,
        logoutEpoch: Int64?, generation: UInt64, subject: String? = nil, signedWith: DPoPKey? = nil
    ) async throws -> Token {
        let now = clock.now
        let refreshToken = response.refreshToken ?? previousRefreshToken
        var token = Token(
            accessToken: response.accessToken, tokenType: response.tokenType, receivedAt: now,
            expiresAt: response.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) }, refreshToken: refreshToken,
            scope: response.scope, version: nextID())
        // Bound to the key that signed the request (the session's, unless a read replaced it since).
        token.dpopKey = session.configuration.dpop ? signedWith ?? session.dpopKey : nil
        if let bound = token.dpopKey { session.dpopKey = bound }
        token.certificateBound = Token.isCertificateBound(response.accessToken, session.configuration)
        let stored = StoredTokens(
            accessToken: token.accessToken, tokenType: token.tokenType, receivedAt: now, expiresAt: token.expiresAt,
            refreshToken: refreshToken, scope: token.scope, subject: subject ?? session.identity?.rawSubject,
            dpopKey: token.dpopKey?.stored)
        let save = await save(stored, storeKey, logoutEpoch: logoutEpoch)
        // Decided after the save's await: a logout in this process landing during the save is not
        // undone (its own store removal, before or after this save, leaves the store empty).
        let decision = RenewalFlight.committed(
            .answer(rotates: response.refreshToken != nil), save, loggedOut: session.generation != generation)
        switch decision {
        case .adopt(let revision):
            session.revision = revision
            session.refreshToken = refreshToken
            session.unsavedRotation = nil
            session.tokenFromStore = false
            return token
        case .keepUnsaved(let failure), .keepRefreshToken(let failure):
            if let rotated = response.refreshToken {
                log.error(
                    "the new tokens of \(session.key) could not be committed to the store (\(failure.description)); "
                        + "the rotated refresh token is kept in memory and committed again on the next use and at exit")
                session.unsavedRotation = UnsavedCommit(
                    refreshToken: rotated, storedRevision: session.revision, stored: stored, token: token,
                    logoutEpoch: logoutEpoch)
            } else {
                log.error(
                    "the new tokens of \(session.key) could not be committed to the store (\(failure.description))")
            }
            session.refreshToken = refreshToken
            session.token = nil
            session.revision = nil
            throw decision == .keepUnsaved(failure) ? failure.keptInMemory(session.key) : failure
        case .forgetAndRevoke, .revoke:
            try await notKept(
                session, forget: decision == .forgetAndRevoke, refreshToken: response.refreshToken,
                accessToken: response.accessToken)
        case .fail(let error): throw error
        case .superseded: throw AuthError.cancelled  // an answer is never superseded: only an unsaved rotation is
        }
    }

    /// Writes what a commit makes the session's, conditioned on `logoutEpoch` (a logout since, in
    /// any process, makes the store refuse it).
    private func save(_ stored: StoredTokens, _ storeKey: StoreKey, logoutEpoch: Int64?) async -> RenewalFlight.Save {
        do {
            guard let revision = try await store.save(stored, for: storeKey, logoutEpoch: logoutEpoch) else {
                return .refusedAfterLogout
            }
            return .saved(revision)
        } catch {
            return .failed(.fromStore(error, Self.commitFailure))
        }
    }

    /// A commit lost to a logout: what it was to write is revoked at the server and the caller gets
    /// ``AuthError/loggedOut``; `forget`: the logout was another process's, and the session forgets
    /// what it held too.
    private func notKept(_ session: Session, forget: Bool, refreshToken: String?, accessToken: String) async throws
        -> Never
    {
        if forget {
            log.info("\(session.key) was logged out in another process; the new tokens are not kept")
            forgetTokens(session)
        }
        await revokeAtServers([
            TokenRevocation(
                key: session.key, configuration: session.configuration, refreshToken: refreshToken,
                accessToken: accessToken)
        ])
        throw AuthError.loggedOut
    }

    /// What a commit the store failed says (when the store's error is not its own).
    static let commitFailure = "the new tokens could not be committed"

    /// How long ``close()`` keeps trying to commit rotated refresh tokens that are not stored yet
    /// (each try waits up to the store's busy timeout for its write lock).
    static let unsavedCommitBoundAtClose: Duration = .seconds(10)

    /// Commits the session's unsaved rotation. On success the session holds it as committed (its
    /// access token as the session's token); a logout since (in any process) drops it and revokes
    /// it; a store failure leaves it kept and is thrown (logged as an error). Which of these holds
    /// is ``RenewalFlight/committed(_:_:loggedOut:)``, as for ``commit(_:previousRefreshToken:session:storeKey:logoutEpoch:generation:subject:signedWith:)``.
    func commitUnsaved(_ session: Session, _ storeKey: StoreKey) async throws {
        guard let unsaved = session.unsavedRotation else { return }
        let generation = session.generation
        let save = await save(unsaved.stored, storeKey, logoutEpoch: unsaved.logoutEpoch)
        // Another path (a logout, a newer entry read meanwhile) may have settled it during the save.
        let held = session.unsavedRotation?.refreshToken == unsaved.refreshToken
        let decision = RenewalFlight.committed(
            .unsavedRotation(held: held), save, loggedOut: session.generation != generation)
        switch decision {
        case .adopt(let revision):
            log.info("the rotated refresh token of \(session.key) is committed to the store now")
            session.unsavedRotation = nil
            session.revision = revision
            session.refreshToken = unsaved.refreshToken
            session.token = unsaved.token
            session.invalidated = false
            session.tokenFromStore = false
        case .keepUnsaved(let failure), .keepRefreshToken(let failure):
            log.error(
                "the rotated refresh token of \(session.key) still could not be committed to the store "
                    + "(\(failure.description)); it is kept in memory")
            throw failure
        case .forgetAndRevoke, .revoke:
            try await notKept(
                session, forget: decision == .forgetAndRevoke, refreshToken: unsaved.refreshToken,
                accessToken: unsaved.token.accessToken)
        case .fail(let error): throw error
        case .superseded: return
        }
    }

    /// At close: commits every unsaved rotation, trying again while the store refuses, for at most
    /// ``unsavedCommitBoundAtClose``. One that still cannot be stored is lost with the process:
    /// said as an error (the session then needs a new login, or a new seed).
    func commitUnsavedAtClose() async {
        let bound = ContinuousClock.now + Self.unsavedCommitBoundAtClose
        for session in sessions.values where session.unsavedRotation != nil {
            guard let storeKey = session.storeKey else { continue }
            // A newer entry (another process's login or renewal) supersedes it: read first.
            try? await reload(session, storeKey)
            var lastError: AuthError?
            while session.unsavedRotation != nil {
                do {
                    try await commitUnsaved(session, storeKey)
                    lastError = nil
                    break
                } catch {
                    lastError = .fromStore(error, Self.commitFailure)
                    if lastError == .loggedOut { lastError = nil }
                    // A store that cannot be used as configured (re-keyed elsewhere) does not heal.
                    if case .store = lastError { break }
                    if lastError == nil || ContinuousClock.now >= bound { break }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            if let lastError, session.unsavedRotation != nil {
                log.error(
                    "the rotated refresh token of \(session.key) could not be committed to the store before exit "
                        + "(\(lastError.description)): the session will need a new login (or a new refresh_token seed)")
            }
        }
    }
}

extension AuthError {
    /// This failure to commit, saying that the session's rotated refresh token is kept in this
    /// process's memory only (SPEC §5.6: a message never claims the stored sessions are intact
    /// when the store holds a spent refresh token). The same kind.
    func keptInMemory(_ session: SessionKey) -> AuthError {
        let kept =
            "; the rotated refresh token of \(session) is kept in this process's memory only (the store holds "
            + "the spent one) and committed when the store accepts it: if this process ends first, \(session) "
            + "needs a new login (or a new seed)"
        switch self {
        case .store(let message): return .store(message + kept)
        case .storage(let message): return .storage(message + kept)
        default: return .storage(description + kept)
        }
    }
}
