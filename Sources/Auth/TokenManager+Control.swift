import Foundation
import HTTP
import Logging

extension TokenManager {
    /// A request signed with the token of version `stamp` was rejected (401 `invalid_token`).
    /// Invalidates that token only if it is still the session's current, valid one, so that many
    /// concurrent 401s on the same token cause one renewal. Throws ``AuthError/excessiveRenewals``
    /// (and emits `auth-failed`) when such renewals exceed the limit in the window; renewals then
    /// stay paused until the window passes or ``invalidate(environment:profile:)`` is called.
    public func invalidate(_ key: SessionKey, stamp: CredentialStamp) throws(AuthError) {
        guard let session = sessions[key], let token = session.token, token.version == stamp.value,
            !session.invalidated
        else { return }
        let now = clock.now
        session.unexplained.removeAll { now.timeIntervalSince($0) >= Self.renewalWindow }
        if let until = session.blockedUntil, now < until { throw .excessiveRenewals }
        session.invalidated = true
        guard session.unexplained.count < Self.renewalLimit else {
            session.blockedUntil = session.unexplained[0].addingTimeInterval(Self.renewalWindow)
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
    /// state is kept, and excessive-renewal pauses are cleared. Returns how many sessions held a
    /// token that is now invalidated.
    @discardableResult
    public func invalidate(environment: String? = nil, profile: String? = nil) -> Int {
        var count = 0
        for session in sessions.values where matches(session.key, environment: environment, profile: profile) {
            session.unexplained.removeAll()
            session.blockedUntil = nil
            if session.token != nil {
                session.invalidated = true
                count += 1
            }
        }
        return count
    }

    /// A client reports that `accessToken` was rejected (git's credential `erase`). Invalidates the
    /// session only when that is its current token (loading the store first when the session was
    /// not read yet), and removes the access token from the store too, keeping the refresh
    /// token, so that a later process does not hand it out again. A token that is no longer the
    /// current one changes nothing. Returns whether the session was invalidated.
    @discardableResult
    public func invalidate(_ key: SessionKey, ifAccessToken accessToken: String) async throws(AuthError) -> Bool {
        guard let session = sessions[key] else { return false }
        if session.flight == nil { try await loadStoredTokens(session) }
        guard let token = session.token, !session.invalidated,
            Self.digest(token.accessToken) == Self.digest(accessToken)
        else { return false }
        // The store is written first, while the token is still usable in memory, so no renewal can
        // start (and commit) while the write is pending; the session is re-checked after it.
        do {
            if let refreshToken = session.refreshToken {
                try await store.save(
                    StoredTokens(accessToken: nil, tokenType: token.tokenType, refreshToken: refreshToken), for: key)
            } else {
                try await store.remove(key)
            }
        } catch {
            throw .storage("the rejected token could not be removed from the store")
        }
        guard session.token?.version == token.version else { return false }
        session.invalidated = true
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
            session.token = nil
            session.refreshToken = nil
            session.invalidated = false
            session.interactionRequired = false
            session.lastError = nil
            session.loaded = true
        }
        var failure: AuthError?
        var revocations: [TokenRevocation] = []
        for (session, revocation, wasLoaded) in loggedOut {
            var revocation = revocation
            if !wasLoaded, let stored = try? await store.load(session.key) {
                revocation.refreshToken = revocation.refreshToken ?? stored.refreshToken
                revocation.accessToken = revocation.accessToken ?? stored.accessToken
            }
            do {
                try await store.remove(session.key)
            } catch {
                failure = .storage("the session could not be removed from the store")
            }
            revocations.append(revocation)
        }
        await revokeAtServers(revocations)
        if let failure { throw failure }
        return loggedOut.count
    }

    /// A snapshot of every session, sorted by environment and profile. Never contains a token.
    public func status() -> [SessionStatus] {
        let now = clock.now
        return sessions.values.sorted {
            ($0.key.environment, $0.key.profile, $0.key.clientID) < (
                $1.key.environment, $1.key.profile, $1.key.clientID
            )
        }.map { session in
            let state: SessionStatus.State
            if session.interactionRequired {
                state = .interactionRequired
            } else if session.flight != nil {
                state = .renewing
            } else if let token = session.token {
                let usable =
                    !session.invalidated && !token.needsRenewal(at: now, skew: session.configuration.expirySkew)
                state = usable ? .valid : .expired
            } else {
                state = session.lastError == nil ? .none : .failed
            }
            return SessionStatus(
                environment: session.key.environment, profile: session.key.profile, type: session.key.grant,
                state: state, expiresAt: session.token?.expiresAt, refreshable: session.refreshToken != nil,
                lastError: session.lastError.map { ($0.kind, $0.description) }, counters: session.counters)
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

    /// Stops the manager: acquisitions not yet sent are cancelled (their callers get
    /// ``AuthError/cancelled``); acquisitions already sent run to completion and commit, and this
    /// waits for them. Later calls to ``token(for:deadline:)`` fail with ``AuthError/cancelled``.
    public func close() async {
        closed = true
        var committing: [Task<Void, Never>] = []
        for session in sessions.values {
            guard let flight = session.flight else { continue }
            if flight.sent {
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
                waiter.continuation.resume(throwing: AuthError.cancelled)
            }
        }
        for task in committing { await task.value }
        await settleDetached()
        finishEvents()
    }

    private func matches(_ key: SessionKey, environment: String?, profile: String?) -> Bool {
        if let environment, key.environment != environment { return false }
        if let profile, key.profile != profile { return false }
        return true
    }
}
