import FoundationEssentials
import TokenRelayLogging
import TokenRelayPlatform

/// What the watchers of sessions last saw (SPEC §13.1). The manager holds one only while someone
/// watches: without a watcher, no change is looked for and nothing is emitted. Must only be
/// accessed from the manager's isolation.
final class SessionWatch {
    /// What was last told about one session.
    struct View {
        /// The store revision of its entry (`nil`: none).
        var revision: Int64?
        /// When that entry's token was received: with the revision, what tells one entry from
        /// another (a revision starts again at 1 when an entry is removed and saved again).
        var receivedAt: Date?
        /// Its token was invalidated.
        var invalidated: Bool
        /// Its token's expiry was told.
        var expired = false
        /// That it needs a login was told.
        var loginRequired: Bool
        /// Its logout count in the store, when read.
        var logoutEpoch: Int64?
        /// Bumped by each change this process made: a store read that began before it is stale.
        var touched: UInt64 = 0
    }

    /// Tells this watch from a later one.
    let id: UInt64
    /// How many watch (``TokenManager/watchSessions()`` minus ``TokenManager/unwatchSessions()``).
    var watchers = 1
    var views: [SessionKey: View] = [:]
    /// A use of a session saw the store change (and consumed the store's signal): the next look
    /// reads the store.
    var storeChanged = false
    /// A look at the store is under way (they never overlap: each change is told once).
    var looking = false
    /// The periodic look.
    var poll: Task<Void, Never>?

    init(id: UInt64) { self.id = id }
}

extension TokenManager {
    /// How often a watched manager looks for changes other processes made: one cheap change check
    /// of the store (SQLite's `PRAGMA data_version`; the store is read only when it changed) and a
    /// look at the held tokens' expiries.
    public static let watchInterval: Duration = .milliseconds(250)

    /// Starts telling session changes as ``AuthEvent/sessionChanged(_:)`` events (SPEC §13.1), or
    /// joins the watch under way. What every session is now is its baseline (read from the store
    /// first); changes from then on are told once each, those other processes make included.
    public func watchSessions() async {
        if let watch {
            watch.watchers += 1
            return
        }
        let watch = SessionWatch(id: nextID())
        self.watch = watch
        try? await loadStored()
        for session in sessions.values where watch.views[session.key] == nil {
            var view = currentView(session, after: nil)
            if let storeKey = watchedStoreKey(session) { view.logoutEpoch = try? await store.logoutEpoch(storeKey) }
            if watch.views[session.key] == nil { watch.views[session.key] = view }
        }
        guard self.watch === watch else { return }
        let interval = Self.watchInterval.timeInterval
        let watchID = watch.id
        watch.poll = Placement.task { [weak self, clock] in
            while true {
                do { try await clock.sleep(until: clock.now.addingTimeInterval(interval)) } catch { return }
                guard let self, await self.lookForChanges(watchID) else { return }
            }
        }
    }

    /// Ends one ``watchSessions()``; the last one stops looking for changes.
    public func unwatchSessions() {
        guard let watch else { return }
        watch.watchers -= 1
        if watch.watchers <= 0 { endWatch() }
    }

    /// Stops looking for changes (the last watcher left, or ``close()``).
    func endWatch() {
        watch?.poll?.cancel()
        watch = nil
    }

    /// Whether someone watches (tests).
    var isWatched: Bool { watch != nil }

    /// A change this process made to `session`: told at once, and remembered so that the store's
    /// change check does not tell it again. Does nothing while nobody watches.
    func sessionChanged(_ session: Session, _ reason: SessionChange.Reason, login: LoginPrompt? = nil) {
        guard let watch else { return }
        let before = watch.views[session.key]
        if reason == .loginRequired, login == nil, before?.loginRequired == true { return }
        var view = currentView(session, after: before)
        if reason == .loggedOut { view.logoutEpoch = before?.logoutEpoch.map { $0 + 1 } }
        view.loginRequired = reason == .loginRequired || reason == .refreshFailed || view.loginRequired
        watch.views[session.key] = view
        emit(.sessionChanged(change(session, reason, login: login)))
    }

    /// A change seen by a use of the store (its signal consumed there): the next look reads it.
    func storeChangeSeen() {
        watch?.storeChanged = true
    }

    /// One look: when the store changed (here seen by its change check, or by a use), reads every
    /// session's entry and tells what another process changed; then tells the held tokens that
    /// expired. Returns whether the watch goes on.
    func lookForChanges(_ watchID: UInt64) async -> Bool {
        guard let watch, watch.id == watchID, !closed else { return false }
        guard !watch.looking else { return true }
        watch.looking = true
        defer { watch.looking = false }
        let changed = store.changedElsewhere() || watch.storeChanged
        watch.storeChanged = false
        if changed {
            // What `markStale` does for a use: the signal is consumed here, so every use re-reads.
            for session in sessions.values { session.loaded = false }
            for session in Array(sessions.values) {
                await readChange(session, watch)
                guard self.watch === watch else { return false }
            }
        }
        let now = clock.now
        for session in sessions.values {
            guard var view = watch.views[session.key], !view.expired, !session.invalidated,
                let expiresAt = session.token?.expiresAt, expiresAt <= now
            else { continue }
            view.expired = true
            watch.views[session.key] = view
            emit(.sessionChanged(change(session, .expired)))
        }
        return true
    }

    /// Reads `session`'s entry, makes it the session's state (unless an acquisition or login is
    /// under way: it reads the store itself) and tells how it differs from what was last told.
    private func readChange(_ session: Session, _ watch: SessionWatch) async {
        guard let before = watch.views[session.key] else {
            watch.views[session.key] = currentView(session, after: nil)
            return
        }
        guard let storeKey = watchedStoreKey(session) else { return }
        let generation = session.generation
        let stored: StoredTokens?
        var epoch: Int64?
        do {
            stored = try await store.load(storeKey)
            epoch = try await store.logoutEpoch(storeKey)
        } catch {
            return  // the next use reports it
        }
        // A change this process made meanwhile was told already; what was read may predate it.
        guard sessions[session.key] === session, let current = watch.views[session.key],
            current.touched == before.touched
        else { return }
        let reasons = Self.storeChanges(
            from: current, to: stored, logoutEpoch: epoch, interactive: session.configuration.grant.interactive != nil)
        if session.flight == nil, session.login == nil, session.generation == generation {
            // Logged out elsewhere: what this process held is gone, even when the new entry has the
            // revision the old one had (revisions start again after a removal).
            if reasons.first == .loggedOut { forgetTokens(session) }
            session.loaded = true
            adoptStored(stored, into: session)
        }
        var view = current
        view.revision = stored?.revision
        view.receivedAt = stored?.receivedAt
        view.invalidated = stored?.invalidated ?? false
        if let epoch { view.logoutEpoch = epoch }
        if !reasons.isEmpty {
            view.expired = false
            view.loginRequired = reasons.last == .refreshFailed || (view.loginRequired && stored == nil)
            if reasons.last == .loggedOut { view.loginRequired = false }
        }
        watch.views[session.key] = view
        if !reasons.isEmpty {
            log.debug("\(session.key) changed in another process: \(reasons.map(\.rawValue).joined(separator: ", "))")
        }
        for (index, reason) in reasons.enumerated() {
            // A logout followed by a new entry: the logout's own state was an empty session.
            let gone = index < reasons.count - 1
            emit(.sessionChanged(change(session, reason, state: gone ? SessionStatus.State.none : nil)))
        }
    }

    /// What changed between the last told view of a session and its entry in the store, in order:
    /// a logout when the session's logout count moved (of an entry that was there); an entry that
    /// appeared is a login (interactive profiles) or an acquisition; one replaced, a renewal (or an
    /// invalidation recorded on it); one gone without a logout, a refused renewal (which removes the
    /// entry). An entry is told apart from another by its revision and when its token was received.
    static func storeChanges(
        from view: SessionWatch.View, to stored: StoredTokens?, logoutEpoch: Int64?, interactive: Bool
    ) -> [SessionChange.Reason] {
        var reasons: [SessionChange.Reason] = []
        let loggedOut = logoutEpoch != nil && view.logoutEpoch != nil && logoutEpoch != view.logoutEpoch
        if loggedOut, view.revision != nil { reasons.append(.loggedOut) }
        let held = loggedOut ? nil : view.revision
        switch (held, stored) {
        case (nil, nil): break
        case (nil, .some(let entry)):
            reasons.append(entry.invalidated ? .invalidated : interactive ? .loggedIn : .valid)
        case (.some, nil):
            // Without a known logout count, a removal cannot be told from a logout.
            reasons.append(view.logoutEpoch == nil ? .loggedOut : .refreshFailed)
        case (.some(let revision), .some(let entry)):
            if entry.revision != revision || !sameTime(view.receivedAt, entry.receivedAt) {
                reasons.append(entry.invalidated ? .invalidated : .valid)
            } else if entry.invalidated && !view.invalidated {
                reasons.append(.invalidated)
            }
        }
        return reasons
    }

    /// Whether two receipt times are the same (within a millisecond: the store keeps seconds as a
    /// double); an unknown one matches any.
    private static func sameTime(_ a: Date?, _ b: Date?) -> Bool {
        guard let a, let b else { return true }
        return abs(a.timeIntervalSince(b)) < 0.001
    }

    /// Where `session` lives in the store, when that is known without resolving anything: from
    /// registration for every grant but a `refresh_token` seed's, whose fingerprint is known once
    /// the session was read.
    private func watchedStoreKey(_ session: Session) -> StoreKey? { session.storeKey }

    /// What a watcher knows of `session` now (keeping what `before` told of a login).
    private func currentView(_ session: Session, after before: SessionWatch.View?) -> SessionWatch.View {
        var view = SessionWatch.View(
            revision: session.revision, receivedAt: session.revision == nil ? nil : session.token?.receivedAt,
            invalidated: session.invalidated,
            loginRequired: session.interactionRequired || session.login != nil, logoutEpoch: before?.logoutEpoch,
            touched: (before?.touched ?? 0) &+ 1)
        if let expiresAt = session.token?.expiresAt, expiresAt <= clock.now { view.expired = true }
        return view
    }

    /// The event of `session` changing for `reason`: its state as `status` shows it now.
    private func change(
        _ session: Session, _ reason: SessionChange.Reason, login: LoginPrompt? = nil,
        state told: SessionStatus.State? = nil
    ) -> SessionChange {
        SessionChange(
            environment: session.key.environment, profile: session.key.profile,
            state: told ?? state(of: session, at: clock.now), reason: reason,
            expiresAt: told == nil ? session.token?.expiresAt : nil, login: login)
    }
}

extension TokenManager {
    /// An acquisition or renewal of `session` failed: a refused renewal is told as
    /// `refresh-failed`, a session found to need a person as `login-required` (once).
    func flightFailed(_ session: Session, _ error: AuthError, refused: Bool) {
        guard watch != nil else { return }
        if refused {
            sessionChanged(session, .refreshFailed)
        } else if error.needsLogin, session.configuration.grant.interactive != nil {
            sessionChanged(session, .loginRequired)
        }
    }
}
