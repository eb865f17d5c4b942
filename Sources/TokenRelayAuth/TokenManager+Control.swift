import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

extension TokenManager {
    /// A request signed with the token of version `stamp` was rejected (401 `invalid_token`).
    /// Invalidates that token only if it is still the session's current, valid one, so that many
    /// concurrent 401s on the same token cause one renewal. Throws ``AuthError/excessiveRenewals``
    /// (and emits `auth-failed`) when such renewals exceed the limit in the window; renewals then
    /// stay paused until the window passes or ``invalidate(environment:profile:)`` is called.
    public func invalidate(_ key: SessionKey, stamp: CredentialStamp) async throws(AuthError) {
        guard let session = sessions[key], let token = session.token, token.version == stamp.value,
            !session.invalidated
        else { return }
        let now = clock.now
        session.unexplained.removeAll { now.timeIntervalSince($0) >= Self.renewalWindow }
        if let until = session.blockedUntil, now < until { throw .excessiveRenewals }
        session.invalidated = true
        sessionChanged(session, .invalidated)
        var earlier = session.unexplained.count
        if let storeKey = session.storeKey {
            // Recorded so that every process sharing the store renews (only while the stored entry
            // is still this token), and counted across them.
            do {
                // Counted across processes only when this 401 is the one that invalidated the
                // stored token: other processes' 401s on the same token cause no renewal of their own.
                var first = true
                if let revision = session.revision {
                    first = try await store.recordInvalidation(storeKey, revision: revision)
                }
                if first {
                    earlier = max(
                        earlier, try await store.recordUnexplainedRenewal(storeKey, at: now, window: Self.renewalWindow)
                    )
                }
            } catch {
                log.warn("the invalidation of \(key) could not be recorded in the store: \(error)")
            }
        }
        guard earlier < Self.renewalLimit else {
            // The window started with the oldest renewal known here (none, when all were counted in
            // other processes, or a `token-invalidate` cleared them during the store's await).
            session.blockedUntil = (session.unexplained.first ?? now).addingTimeInterval(Self.renewalWindow)
            let error = AuthError.excessiveRenewals
            session.lastError = error
            log.warn("token renewals paused for \(key): \(error.description)")
            emit(.authFailed(AuthFailure(key: key, error: error)))
            throw error
        }
        session.unexplained.append(now)
        session.counters.recoveries += 1
    }

    /// Expires the access tokens of the matching sessions (every session when both are nil; every
    /// profile of `environment` when only `profile` is nil) so the next use renews them; refresh
    /// state is kept, and excessive-renewal pauses are cleared. The invalidation is recorded in the
    /// store, whether or not this process used the session yet (every process sharing the store
    /// renews). Returns how many sessions held a token (here or in the store) that is now
    /// invalidated.
    @discardableResult
    public func invalidate(environment: String? = nil, profile: String? = nil) async -> Int {
        var count = 0
        for session in sessions.values where matches(session.key, environment: environment, profile: profile) {
            session.unexplained.removeAll()
            session.blockedUntil = nil
            var recorded = false
            do {
                let storeKey = try await self.storeKey(of: session)
                try await store.open()
                try await store.clearUnexplainedRenewals(storeKey)
                recorded = try await store.recordInvalidation(storeKey, revision: nil)
            } catch {
                log.warn("the invalidation of \(session.key) could not be recorded in the store: \(error)")
            }
            if session.token != nil {
                session.invalidated = true
            }
            if session.token != nil || recorded {
                count += 1
                sessionChanged(session, .invalidated)
            }
        }
        return count
    }

    /// A client reports that `accessToken` was rejected (git's credential `erase`). Invalidates the
    /// session only when that is its current token (reading the store first when no renewal is
    /// under way), and records the invalidation in the store (refresh state kept), so that no
    /// process hands that token out again. A token that is no longer the current one changes
    /// nothing. Returns whether the session was invalidated.
    @discardableResult
    public func invalidate(_ key: SessionKey, ifAccessToken accessToken: String) async throws(AuthError) -> Bool {
        guard let session = sessions[key] else { return false }
        let storeKey = try await storeCall {
            let storeKey = try await resolveStoreKey(session).key
            if session.flight == nil { try await reload(session, storeKey) }
            return storeKey
        }
        guard let token = session.token, !session.invalidated,
            Self.digest(token.accessToken) == Self.digest(accessToken)
        else { return false }
        do {
            _ = try await store.recordInvalidation(storeKey, revision: session.revision)
        } catch {
            throw .storage("the rejected token could not be invalidated in the store")
        }
        guard session.token?.version == token.version else { return false }
        session.invalidated = true
        sessionChanged(session, .invalidated)
        return true
    }

    /// Drops every token of the matching sessions, refresh state included, and removes them from
    /// the store; clears `interaction_required`. Then, where the issuer's metadata names an RFC 7009
    /// revocation endpoint, revokes the dropped refresh and access tokens there (bounded in time; a
    /// failure to revoke is logged, and the local logout stands). Returns how many sessions were
    /// logged out.
    @discardableResult
    public func logout(environment: String? = nil, profile: String? = nil) async throws(AuthError) -> Int {
        var loggedOut: [(session: Session, revocation: TokenRevocation, wasLoaded: Bool)] = []
        for session in sessions.values where matches(session.key, environment: environment, profile: profile) {
            let revocation = TokenRevocation(
                key: session.key, configuration: session.configuration, refreshToken: session.refreshToken,
                accessToken: session.token?.accessToken)
            loggedOut.append((session, revocation, session.loaded))
            session.generation += 1
            forgetTokens(session)
            session.interactionRequired = false
            session.lastError = nil
            session.loaded = true
        }
        var failure: AuthError?
        var revocations: [TokenRevocation] = []
        for (session, revocation, wasLoaded) in loggedOut {
            var revocation = revocation
            let storeKey: StoreKey
            do {
                storeKey = try await self.storeKey(of: session)
            } catch let error as AuthError {
                failure = error
                continue
            } catch {
                failure = .configuration("the refresh_token seed of \(session.key) could not be resolved")
                continue
            }
            // The store may hold newer tokens than this process (another one renewed): revoke those.
            if let stored = try? await store.load(storeKey) {
                if !wasLoaded || stored.revision != session.revision {
                    revocation.refreshToken = stored.refreshToken ?? revocation.refreshToken
                    revocation.accessToken = stored.accessToken ?? revocation.accessToken
                }
            }
            do {
                try await store.logOut(storeKey)
            } catch {
                failure = .storage("the session could not be removed from the store")
            }
            if revocation.refreshToken != nil || revocation.accessToken != nil { sessionChanged(session, .loggedOut) }
            revocations.append(revocation)
        }
        await revokeAtServers(revocations)
        if let failure { throw failure }
        return loggedOut.count
    }

    /// The session's store key, resolving a `refresh_token` seed for its fingerprint if needed.
    func storeKey(of session: Session) async throws -> StoreKey {
        try await resolveStoreKey(session).key
    }

    /// Opens the store and reads every session not read yet (for `status`: another process's
    /// tokens show up); with none, does nothing. A failure is reported as the session's last error (or thrown, for the
    /// store itself).
    public func loadStored() async throws {
        // Nothing to read: the store is not opened (and libsqlite3 not loaded) for nothing.
        guard sessions.values.contains(where: { $0.flight == nil && !$0.loaded }) else { return }
        try await store.open()
        for session in sessions.values where session.flight == nil && !session.loaded {
            do {
                let storeKey = try await self.storeKey(of: session)
                let stored = try await store.load(storeKey)
                guard session.flight == nil, !session.loaded else { continue }
                session.loaded = true
                adoptStored(stored, into: session)
            } catch let error as AuthError {
                session.lastError = error
            } catch {
                session.lastError = .storage("the token store could not be read")
            }
        }
    }

    /// A snapshot of every session, sorted by environment and profile. Never contains a token.
    public func status() -> [SessionStatus] {
        let now = clock.now
        return sessions.values.sorted {
            ($0.key.environment, $0.key.profile, $0.key.clientID) < (
                $1.key.environment, $1.key.profile, $1.key.clientID
            )
        }.map { session in
            let state = state(of: session, at: now)
            return SessionStatus(
                environment: session.key.environment, profile: session.key.profile, type: session.key.grant,
                state: state, expiresAt: session.token?.expiresAt, refreshable: session.refreshToken != nil,
                lastError: session.lastError.map { ($0.errorKind, $0.description) }, counters: session.counters,
                fromStore: session.token != nil && session.tokenFromStore, identity: session.identity)
        }
    }

    /// Forgets every session not in `keys` (after a configuration reload). Their callers waiting
    /// on an acquisition not yet sent get ``AuthError/cancelled``; one already sent still commits to
    /// the store. Returns how many sessions were removed.
    @discardableResult
    public func removeSessions(except keys: Set<SessionKey>) -> Int {
        let removed = sessions.keys.filter { !keys.contains($0) }
        for key in removed {
            guard let session = sessions.removeValue(forKey: key), let flight = session.flight else { continue }
            if !flight.sent {
                flight.task?.cancel()
                detached[flight.id] = flight.task
            }
            let waiters = flight.waiters
            flight.waiters = [:]
            for waiter in waiters.values {
                waiter.timer?.cancel()
                waiter.continuation.resume(throwing: AuthError.cancelled)
            }
        }
        return removed.count
    }

    /// The keys of every registered session.
    public var sessionKeys: [SessionKey] { Array(sessions.keys) }

    /// Stops the manager: acquisitions and logins not yet sent are cancelled (their callers get
    /// ``AuthError/shuttingDown``); acquisitions and logins whose token request was already sent run
    /// to completion and commit (the server may have rotated the refresh token already; SPEC
    /// §5.2), bounded by their own timeouts, and this waits for them. Later calls to
    /// ``token(for:deadline:)`` fail with ``AuthError/shuttingDown``.
    public func close() async {
        closed = true
        endWatch()
        endLogins()
        var committing: [Task<Void, Never>] = []
        for session in sessions.values {
            if let login = session.login, login.sent, let task = login.task {
                log.info("\(session.key): finishing the login whose token request was already sent before stopping")
                committing.append(task)
            }
            guard let flight = session.flight else { continue }
            if flight.sent {
                log.info(
                    "\(session.key): finishing the token request already sent, and committing its answer, before"
                        + " stopping (at most until its own timeout)")
                if let task = flight.task { committing.append(task) }
                continue
            }
            flight.task?.cancel()
            detached[flight.id] = flight.task
            session.flight = nil
            let waiters = flight.waiters
            flight.waiters = [:]
            for waiter in waiters.values {
                waiter.timer?.cancel()
                waiter.continuation.resume(throwing: AuthError.shuttingDown)
            }
        }
        for task in committing { await task.value }
        await settleDetached()
        await commitUnsavedAtClose()
        finishEvents()
    }

    /// The session's state as `status` shows it.
    func state(of session: Session, at now: Date) -> SessionStatus.State {
        if session.interactionRequired || (session.token == nil && session.lastError?.needsLogin == true) {
            return .interactionRequired
        } else if session.flight != nil {
            return .renewing
        } else if let token = session.token {
            let usable = !session.invalidated && !token.needsRenewal(at: now, skew: session.configuration.expirySkew)
            return usable ? .valid : .expired
        }
        return session.lastError == nil ? .none : .failed
    }

    private func matches(_ key: SessionKey, environment: String?, profile: String?) -> Bool {
        if let environment, key.environment != environment { return false }
        if let profile, key.profile != profile { return false }
        return true
    }
}
