/// The decisions of one flight (an acquisition or renewal of a session's token, run by ``TokenManager``) as pure
/// functions of what the session holds: no store, no network, no clock. At each decision point the manager reads a
/// ``Snapshot`` afresh, asks the decision of the point it has reached, and does what the answer says (the effects:
/// reading the store, taking its lease, sending, committing).
///
/// Rules, in the order a flight meets them:
/// - Before the lease: a usable token found by the flight's own first read is used (nothing sent, no lease). A flight
///   that no caller waits for (a read ahead of use, ``TokenManager/readAhead(_:)``, that nobody joined) ends after
///   its read. A person's session without a refresh token needs the person: `login_required`, with nothing sent.
///   Else the flight takes the store's lease.
/// - Under the lease, **logout wins**: a logout since the flight started ends it with `logged_out`, whatever was
///   read. The store is read again (another process may have renewed meanwhile); a rotated refresh token whose commit
///   failed is committed before anything else is sent; then a usable token is used; a session whose refresh token
///   was refused stays refused until a logout; else the flight renews.
/// - A renewal sends the held refresh token; without one, a `refresh_token` profile sends its configured seed, once
///   only (a seed already sent by any process is spent: sending it again would be a replay), and a machine's profile
///   its own grant (client credentials, an assertion, a token exchange); a person's session whose refresh token went
///   while it waited for the lease (another process logged out, or had it refused) needs the person again:
///   `login_required`, as before the lease, with nothing sent.
/// - A refused refresh token or seed (`invalid_grant`): logout wins (the logout revoked it); else it is forgotten and
///   a machine's profile tries its own grant once; other sessions need a person, or a new seed, until a logout.
/// - An answer: logout wins (nothing of it is kept, what it issued is revoked); else it is committed, even when every
///   caller has left: **a rotated refresh token, once sent, is committed** (the one it replaces is spent).
///
/// Around the flight (``sending(current:callers:cancelled:)``, ``callerLeft(callersLeft:sent:)``,
/// ``failure(_:loggedOut:)``) and at each commit, the answer's and an unsaved rotation's alike
/// (``committed(_:_:loggedOut:)``): the same two rules, written once here.
struct RenewalFlight: Sendable, Equatable {
    /// Where a session's token comes from when it holds no refresh token.
    enum Origin: Sendable, Equatable {
        /// A person's login (`authorization_code`, `device_code`): only `login` starts one.
        case login
        /// The refresh token configured as a `refresh_token` profile's seed.
        case seed
        /// The profile's own grant, with no person: client credentials, a JWT bearer assertion, a token exchange.
        case ownGrant
    }

    /// What the session holds at a decision, read by the manager just before it asks.
    struct Snapshot: Sendable, Equatable {
        /// A logout of the session came since the flight started (the session's generation moved).
        var loggedOut = false
        /// The held token, when it may be used now (and lasts as long as the callers asked).
        var usableToken: Token?
        /// Whether any caller waits on the flight.
        var callers = true
        /// The held refresh token.
        var refreshToken: String?
        /// A rotated refresh token is held whose commit to the store failed.
        var unsavedRotation = false
        /// The refresh token was refused (only a logout clears this).
        var interactionRequired = false
        /// The session's last error (what said that the refresh token was refused).
        var lastError: AuthError?
    }

    /// After the session's first read (or at once, when it was read before this flight).
    enum BeforeLease: Sendable, Equatable {
        /// Answer with this token; nothing is sent.
        case useStored(Token)
        /// End the flight after its read: nobody waits for an answer.
        case endRead
        /// End the flight with this error; nothing is sent.
        case fail(AuthError)
        /// Take the store's renewal lease, then read the logout epoch and decide ``underLease(_:after:)``.
        case takeLease
    }

    /// What the flight did last under the lease.
    enum LeaseProgress: Sendable, Equatable {
        /// Took the lease and read the logout epoch.
        case tookLease
        /// Read the store again.
        case reread
        /// Committed the unsaved rotation.
        case committedUnsaved
    }

    /// A step under the lease, before anything is sent.
    enum UnderLease: Sendable, Equatable {
        /// End the flight with this error; nothing is sent.
        case fail(AuthError)
        /// Read the store again.
        case reread
        /// Commit the rotated refresh token whose commit failed before (its access token may still serve).
        case commitUnsaved
        /// Answer with this token; nothing is sent.
        case useStored(Token)
        /// Send a token request: see ``renewal(_:)``.
        case renew
    }

    /// What a token request sends.
    enum Send: Sendable, Equatable {
        /// The held refresh token.
        case refresh(String)
        /// The configured seed (recorded as spent, here and in the store, as it goes out).
        case seed(String)
        /// The profile's own grant.
        case ownGrant

        /// The refresh token (or seed) the request spends, if it sends one.
        var refreshToken: String? {
            switch self {
            case .refresh(let token), .seed(let token): token
            case .ownGrant: nil
            }
        }
    }

    /// What a renewal sends, or why it cannot.
    enum Renewal: Sendable, Equatable {
        /// Send this.
        case send(Send)
        /// Resolve the configured seed and learn whether it was sent before, then ``sending(seed:spent:)``.
        case checkSeed
        /// End the flight with this error; nothing is sent.
        case fail(AuthError)
    }

    /// After a refresh token or seed was refused (`invalid_grant`).
    enum Refusal: Sendable, Equatable {
        /// End the flight with this error (the session was logged out: that is why the token was refused).
        case fail(AuthError)
        /// Forget the refused token (memory and store), then send the profile's own grant.
        case fallBackToOwnGrant
        /// Forget the refused token, mark the session as needing interaction (with this error, until a logout),
        /// and fail with it.
        case requireInteraction(AuthError)
    }

    /// After the token endpoint answered.
    enum Answer: Sendable, Equatable {
        /// Keep nothing, revoke what the answer issued, and fail.
        case revokeAndFail(AuthError)
        /// Commit the answer before anyone sees it. `replacing`: the refresh token (or seed) the request spent,
        /// kept when the answer rotates none; a renewal's ID token is checked against the session's first.
        case commit(replacing: String?)
    }

    /// What a commit writes to the store.
    enum Committing: Sendable, Equatable {
        /// The token endpoint's answer; `rotates`: it issued a new refresh token (the one sent is spent).
        case answer(rotates: Bool)
        /// A rotated refresh token whose earlier commit failed; `held`: the session still holds it (no logout, no
        /// newer entry read, settled it meanwhile).
        case unsavedRotation(held: Bool)
    }

    /// How the store took a commit's write.
    enum Save: Sendable, Equatable {
        /// Written, as this revision.
        case saved(Int64)
        /// Refused: the session was logged out (in any process) since the flight read the logout epoch.
        case refusedAfterLogout
        /// The store failed (its lock held too long, a disk failure): nothing is known to be written.
        case failed(AuthError)
    }

    /// What a commit does after the store's answer.
    enum Commit: Sendable, Equatable {
        /// Make it the session's state, at this revision.
        case adopt(Int64)
        /// Keep the rotated refresh token in memory as an unsaved commit (tried again on the next use and at close),
        /// and fail with this error: the refresh token it replaced is spent.
        case keepUnsaved(AuthError)
        /// Nothing rotated: keep the refresh token held (not spent), drop the token whose entry is unknown, and fail
        /// with this error.
        case keepRefreshToken(AuthError)
        /// Logged out in another process (the store refused): forget the session's tokens, revoke what the commit
        /// was to write, and fail with ``AuthError/loggedOut``.
        case forgetAndRevoke
        /// Logged out in this process during the save: revoke what the commit was to write (the logout could not
        /// know of it) and fail with ``AuthError/loggedOut``.
        case revoke
        /// End with this error, changing nothing.
        case fail(AuthError)
        /// Another path settled the unsaved rotation meanwhile (a newer entry was read): nothing to do.
        case superseded
    }

    /// What a waiting caller's leaving (its cancellation or deadline) does to the flight.
    enum CallerLeft: Sendable, Equatable {
        /// The flight goes on (other callers wait, or its request is sent).
        case keepFlight
        /// Cancel the flight and detach it: nothing was sent and nobody waits.
        case cancelFlight
    }

    /// The profile's name (for messages).
    let profile: String
    /// The session's scopes (what a login would ask for).
    let scopes: [String]
    /// Where the session's token comes from without a refresh token.
    let origin: Origin

    init(profile: String, scopes: [String], origin: Origin) {
        self.profile = profile
        self.scopes = scopes
        self.origin = origin
    }

    /// The decisions of `key`'s flights, for a profile of `grant`.
    init(_ key: SessionKey, grant: Grant) {
        let origin: Origin =
            switch grant {
            case .interactive: .login
            case .refreshToken: .seed
            case .clientCredentials, .jwtBearer, .tokenExchange: .ownGrant
            }
        self.init(profile: key.profile, scopes: key.scopes, origin: origin)
    }

    /// What fails a flight of a machine's profile that has no grant to send.
    var nothingToSend: AuthError { .configuration("profile '\(profile)' has no way to obtain a token") }

    /// What fails a flight of a person's session that holds no refresh token: only a login helps.
    var loginRequired: AuthError { .loginRequired("profile '\(profile)' needs a person to log in", scopes: scopes) }

    // MARK: Decisions

    /// Before the lease; `justRead`: the flight read the store itself (it had not been read before).
    func beforeLease(_ session: Snapshot, justRead: Bool) -> BeforeLease {
        if justRead, let token = session.usableToken { return .useStored(token) }
        if !session.callers { return .endRead }
        if session.refreshToken == nil, origin == .login {
            return .fail(loginRequired)
        }
        return .takeLease
    }

    /// Under the lease, after `progress`.
    func underLease(_ session: Snapshot, after progress: LeaseProgress) -> UnderLease {
        if session.loggedOut { return .fail(.loggedOut) }
        if progress == .tookLease { return .reread }
        if progress == .reread, session.unsavedRotation { return .commitUnsaved }
        if let token = session.usableToken { return .useStored(token) }
        if session.interactionRequired {
            return .fail(session.lastError ?? .interactionRequired("the refresh token was refused"))
        }
        return .renew
    }

    /// What the renewal sends (decided once the token endpoint is known: the session may have changed meanwhile).
    func renewal(_ session: Snapshot) -> Renewal {
        if let refreshToken = session.refreshToken { return .send(.refresh(refreshToken)) }
        switch origin {
        case .seed: return .checkSeed
        case .ownGrant: return .send(.ownGrant)
        case .login: return .fail(loginRequired)
        }
    }

    /// The configured seed is sent unless it is `spent` (sent before, by this process or another): a spent seed was
    /// rotated or refused, and sending it again would be a replay (a server with reuse protection would revoke the
    /// whole family).
    func sending(seed: String, spent: Bool) -> Result<Send, AuthError> {
        guard !spent else {
            return .failure(.interactionRequired("the configured refresh token was already used; provision a new one"))
        }
        return .success(.seed(seed))
    }

    /// The refresh token (or seed) was refused.
    func refused(_ session: Snapshot) -> Refusal {
        if session.loggedOut { return .fail(.loggedOut) }
        switch origin {
        case .ownGrant: return .fallBackToOwnGrant
        case .login: return .requireInteraction(.loginRequired("the refresh token was refused (invalid_grant)"))
        case .seed: return .requireInteraction(.interactionRequired("the refresh token was refused (invalid_grant)"))
        }
    }

    /// The token endpoint answered the request that sent `sent`. Whether callers still wait does not matter.
    func answered(_ sent: Send, _ session: Snapshot) -> Answer {
        if session.loggedOut { return .revokeAndFail(.loggedOut) }
        return .commit(replacing: sent.refreshToken)
    }

    /// **A rotated refresh token, once sent, is committed**, and **logout wins**, at every commit: the answer's
    /// (``answered(_:_:)`` said commit) and an unsaved rotation's (under the lease, or at close). `loggedOut`: the
    /// session was logged out in this process since the flight started.
    ///
    /// A logout in this process wins whatever the store did: what the commit wrote (or the store refused) is revoked
    /// when the logout could not know of it (an answer's tokens); an unsaved rotation is the session's, revoked by
    /// the logout itself. A store that refused (a logout in another process) wins too. Else a store failure keeps a
    /// rotated refresh token in memory, never lost.
    static func committed(_ what: Committing, _ save: Save, loggedOut: Bool) -> Commit {
        let failed = if case .failed = save { true } else { false }
        if loggedOut {
            if case .answer = what, !failed { return .revoke }
            return .fail(.loggedOut)
        }
        switch save {
        case .failed(let error):
            return what == .answer(rotates: false) ? .keepRefreshToken(error) : .keepUnsaved(error)
        case _ where what == .unsavedRotation(held: false): return .superseded
        case .saved(let revision): return .adopt(revision)
        case .refusedAfterLogout: return .forgetAndRevoke
        }
    }

    /// The sent rule: a flight sends its first token request only while it is the session's `current` flight, some
    /// caller waits (`callers`) and it is not `cancelled`; from then on it runs to its end, whoever leaves (its answer
    /// is committed). `false`: it is abandoned, nothing is sent.
    static func sending(current: Bool, callers: Bool, cancelled: Bool) -> Bool {
        current && callers && !cancelled
    }

    /// A caller left (cancelled, or its deadline passed): the flight is cancelled only when it was the last one and
    /// nothing was sent (a sent request runs on: see ``sending(current:callers:cancelled:)``).
    static func callerLeft(callersLeft: Int, sent: Bool) -> CallerLeft {
        callersLeft == 0 && !sent ? .cancelFlight : .keepFlight
    }

    /// What the flight's callers are told when it threw `error`: whatever failed after a logout of the session
    /// (`loggedOut`), that logout; an error that is not the manager's own is the flight's cancellation.
    static func failure(_ error: any Error, loggedOut: Bool) -> AuthError {
        guard let error = error as? AuthError else { return .cancelled }
        return loggedOut ? .loggedOut : error
    }
}
