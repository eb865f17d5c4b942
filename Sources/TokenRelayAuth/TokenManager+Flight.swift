import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

extension TokenManager {
    /// What a flight produced.
    enum FlightOutcome {
        /// A token loaded from the store, still usable: nothing was sent.
        case stored(Token)
        /// A token obtained from the token endpoint.
        case obtained(Token)
        /// The store was read for no caller (``TokenManager/readAhead(_:)``): nothing to answer.
        case loaded
    }

    /// Reads `key`'s session from the store ahead of its first use, when it is not read yet and no
    /// acquisition is under way: a one-shot `call` starts this as soon as it knows its profile, so
    /// the read runs while libcurl loads and the request finds the stored token in memory. The
    /// read is a flight no caller waits for: it ends after the read, sending nothing and taking no
    /// lease, unless a caller has joined it by then (it then goes on as any acquisition does).
    /// Returns the read's task (to await it), or `nil` when the session is read already or an
    /// acquisition is under way.
    @discardableResult
    public func readAhead(_ key: SessionKey) -> Task<Void, Never>? {
        guard !closed, let session = sessions[key], !session.loaded, session.flight == nil else { return nil }
        return startFlight(session).task
    }

    /// Starts an acquisition for `session` in an unstructured task (so callers' cancellation does
    /// not reach it once it has sent its request). The flight is bounded by the configuration's
    /// acquisition timeout only: callers leave at their own deadlines, and a request already sent
    /// runs to completion so that a rotated refresh token is committed (SPEC §5.2).
    func startFlight(_ session: Session) -> Flight {
        let bound = clock.now.addingTimeInterval(session.configuration.acquisitionTimeout.timeInterval)
        let flight = Flight(id: nextID(), deadline: bound)
        flight.generation = session.generation
        session.flight = flight
        let key = session.key
        let flightID = flight.id
        flight.task = Placement.task(.executor(taskExecutor)) { await self.runFlight(key, flightID: flightID) }
        return flight
    }

    /// Called by the endpoint client just before the first token request goes out: marks the
    /// flight as sent, or refuses (CancellationError) when it was abandoned
    /// (``RenewalFlight/sending(current:callers:cancelled:)``).
    /// `seed`, when given, is the configured refresh-token seed being sent: it is recorded as
    /// consumed from then on, in this process and in the store.
    func markSent(_ key: SessionKey, flightID: UInt64, seed: String? = nil) async throws {
        guard let flight = sessions[key]?.flight,
            RenewalFlight.sending(
                current: !closed && flight.id == flightID, callers: !flight.waiters.isEmpty, cancelled: Task.isCancelled
            )
        else { throw CancellationError() }
        TokenRequestWatch.willSend()
        flight.sent = true
        if let seed {
            let digest = Self.digest(seed)
            consumedSeeds.insert(digest)
            do {
                try await store.markSeedSpent(StoreKey.hex(digest))
            } catch {
                log.warn("the spent seed of \(key) could not be recorded in the store: \(error)")
            }
        }
    }

    private func runFlight(_ key: SessionKey, flightID: UInt64) async {
        defer { detached[flightID] = nil }
        guard let session = sessions[key], let flight = session.flight, flight.id == flightID else { return }
        let result: Result<FlightOutcome, AuthError>
        do {
            result = .success(try await acquire(session, flight))
        } catch {
            result = .failure(RenewalFlight.failure(error, loggedOut: session.generation != flight.generation))
        }
        finish(session, flight, result)
    }

    /// Commits a flight's result and answers its waiters. A detached (abandoned) flight changes
    /// nothing.
    private func finish(_ session: Session, _ flight: Flight, _ result: Result<FlightOutcome, AuthError>) {
        guard session.flight === flight, sessions[session.key] === session else { return }
        session.flight = nil
        let waiters = flight.waiters
        flight.waiters = [:]
        let answer: Result<Token, any Error>
        switch result {
        case .success(.stored(let token)):
            answer = .success(token)
        case .success(.loaded):
            assert(waiters.isEmpty, "a flight that ended with its read had waiters")
            answer = .failure(AuthError.cancelled)  // no waiters: see `acquire`
        case .success(.obtained(let token)):
            session.token = token
            session.invalidated = false
            session.lastError = nil
            if flight.isRenewal { session.counters.renewals += 1 } else { session.counters.acquisitions += 1 }
            sessionChanged(session, .valid)
            answer = .success(token)
        case .failure(let error):
            if error != .cancelled && error != .loggedOut { session.lastError = error }
            if flight.isRenewal && error.isRefusal {
                log.warn("token renewal refused for \(session.key): \(error.description)")
                emit(.authFailed(AuthFailure(key: session.key, error: error)))
            }
            flightFailed(session, error, refused: flight.isRenewal && error.isRefusal)
            answer = .failure(error)
        }
        for waiter in waiters.values {
            waiter.timer?.cancel()
            waiter.continuation.resume(with: answer)
        }
    }

    /// Loads the store if needed (a valid stored token is used without the lease), then, holding
    /// the session's lease across processes, re-reads the store (another process may have renewed
    /// meanwhile) and obtains a token (refresh first, the profile's own grant as it allows) and
    /// commits it. What to do at each point is ``RenewalFlight``'s decision, made on a snapshot of
    /// the session read at that decision; this performs it.
    private func acquire(_ session: Session, _ flight: Flight) async throws -> FlightOutcome {
        // The flight keeps the configuration it started with (a reload may replace the session's).
        let configuration = session.configuration
        let decisions = RenewalFlight(session.key, grant: configuration.grant)
        let (storeKey, seedValue) = try await resolveStoreKey(session)
        let justRead = !session.loaded
        if justRead { try await reload(session, storeKey) }
        switch decisions.beforeLease(snapshot(session, flight), justRead: justRead) {
        case .useStored(let token): return .stored(token)
        // A read ahead of use (`readAhead`) that no caller has joined ends here; so does an abandoned
        // flight. Nothing suspends between this decision and `finish`.
        case .endRead: return .loaded
        case .fail(let error): throw error
        case .takeLease: break
        }
        try Task.checkCancellation()
        let lease = try await store.acquireLease(
            storeKey, purpose: .renewal, deadline: flight.deadline,
            expiresAt: flight.deadline.addingTimeInterval(Self.leaseMargin))
        defer { store.releaseLease(lease) }
        if let afterLease { await afterLease() }
        try Task.checkCancellation()
        // Read under the lease, before the store: a logout in any process after this (it bumps the
        // epoch) makes the commit write nothing.
        let logoutEpoch = try await readLogoutEpoch(storeKey)
        var progress = RenewalFlight.LeaseProgress.tookLease
        while true {
            switch decisions.underLease(snapshot(session, flight), after: progress) {
            case .fail(let error): throw error
            case .reread:
                try await reload(session, storeKey)
                progress = .reread
            case .commitUnsaved:
                do {
                    try await commitUnsaved(session, storeKey)
                } catch let error as AuthError where error != .loggedOut {
                    throw error.keptInMemory(session.key)
                }
                progress = .committedUnsaved
            case .useStored(let token): return .stored(token)
            case .renew:
                return .obtained(
                    try await renew(
                        session, flight, decisions, configuration: configuration, storeKey: storeKey,
                        resolvedSeed: seedValue, logoutEpoch: logoutEpoch))
            }
        }
    }

    /// What the flight's decisions look at (``RenewalFlight/Snapshot``), read now.
    func snapshot(_ session: Session, _ flight: Flight) -> RenewalFlight.Snapshot {
        RenewalFlight.Snapshot(
            loggedOut: session.generation != flight.generation,
            usableToken: usableToken(session, now: clock.now, minimumValidity: flight.minimumValidity),
            callers: !flight.waiters.isEmpty, refreshToken: session.refreshToken,
            unsavedRotation: session.unsavedRotation != nil, interactionRequired: session.interactionRequired,
            lastError: session.lastError)
    }
}
