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
    /// How long ``close()`` keeps trying to commit rotated refresh tokens that are not stored yet
    /// (each try waits up to the store's busy timeout for its write lock).
    static let unsavedCommitBoundAtClose: Duration = .seconds(10)

    /// Commits the session's unsaved rotation. On success the session holds it as committed (its
    /// access token as the session's token); a logout since (in any process) drops it and revokes
    /// it; a store failure leaves it kept and is thrown (logged as an error).
    func commitUnsaved(_ session: Session, _ storeKey: StoreKey) async throws {
        guard let unsaved = session.unsavedRotation else { return }
        let generation = session.generation
        let revision: Int64?
        do {
            revision = try await store.save(unsaved.stored, for: storeKey, logoutEpoch: unsaved.logoutEpoch)
        } catch {
            let failure = (error as? AuthError) ?? AuthError.storage("the new tokens could not be committed")
            log.error(
                "the rotated refresh token of \(session.key) still could not be committed to the store "
                    + "(\(failure.description)); it is kept in memory")
            throw failure
        }
        // Another path (a logout, a newer entry read meanwhile) may have settled it during the save.
        guard session.generation == generation, session.unsavedRotation?.refreshToken == unsaved.refreshToken else {
            return
        }
        guard let revision else {
            log.info("\(session.key) was logged out in another process; the new tokens are not kept")
            forgetTokens(session)
            await revokeAtServers([
                TokenRevocation(
                    key: session.key, configuration: session.configuration, refreshToken: unsaved.refreshToken,
                    accessToken: unsaved.token.accessToken)
            ])
            throw AuthError.loggedOut
        }
        log.info("the rotated refresh token of \(session.key) is committed to the store now")
        session.unsavedRotation = nil
        session.revision = revision
        session.refreshToken = unsaved.refreshToken
        session.token = unsaved.token
        session.invalidated = false
        session.tokenFromStore = false
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
                    lastError = (error as? AuthError) ?? AuthError.storage("the new tokens could not be committed")
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
