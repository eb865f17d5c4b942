import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

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
        flight.task = Task(executorPreference: taskExecutor) { await self.runFlight(key, flightID: flightID) }
        return flight
    }

    /// Called by the endpoint client just before the first token request goes out: marks the
    /// flight as sent, or refuses (CancellationError) when it was abandoned.
    /// `seed`, when given, is the configured refresh-token seed being sent: it is recorded as
    /// consumed from then on, in this process and in the store.
    func markSent(_ key: SessionKey, flightID: UInt64, seed: String? = nil) async throws {
        guard !closed, let flight = sessions[key]?.flight, flight.id == flightID, !flight.waiters.isEmpty,
            !Task.isCancelled
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
        } catch let error as AuthError {
            // Whatever failed after a logout of the session, the callers' answer is that logout.
            result = .failure(session.generation == flight.generation ? error : .loggedOut)
        } catch {
            result = .failure(.cancelled)
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
    /// the session read after every await; this performs it.
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

    /// Under the lease, with no usable token: sends what `decisions` choose (falling back to the
    /// profile's own grant when they say so) and commits the answer, or revokes it when the session
    /// was logged out meanwhile. `resolvedSeed`: the seed, if resolving the store key just did.
    private func renew(
        _ session: Session, _ flight: Flight, _ decisions: RenewalFlight, configuration: OAuthClientConfiguration,
        storeKey: StoreKey, resolvedSeed: String?, logoutEpoch: Int64
    ) async throws -> Token {
        let key = session.key
        flight.isRenewal = session.token != nil
        let traffic = traffic(for: key)
        let endpointClient = traffic.endpoint
        let endpoint = try await tokenEndpoint(
            for: configuration, discovery: traffic.discovery, deadline: flight.deadline)
        let credential = try await ClientCredential.resolve(configuration, tokenEndpoint: endpoint)
        if case .certificate(let identity) = credential { session.clientIdentity = identity }
        var send: RenewalFlight.Send
        switch decisions.renewal(snapshot(session, flight)) {
        case .send(let decided): send = decided
        case .checkSeed:
            let seed = try await configuredSeed(resolvedSeed, configuration)
            send = try decisions.sending(seed: seed.value, spent: seed.spent).get()
        case .fail(let error): throw error
        }
        if send.refreshToken != nil, configuration.isOpenIDConnect {
            // The renewal's ID token is validated with the issuer's keys: have them before the
            // refresh token is spent, so that an unreachable JWKS fails this renewal (nothing sent)
            // rather than the validation of tokens already issued.
            try await prepareRenewalIDTokenKeys(session, deadline: flight.deadline)
        }
        let dpop = try dpopSigning(session)
        let flightID = flight.id
        let sentSeed: String? = if case .seed(let seed) = send { seed } else { nil }
        let beforeSend: @Sendable () async throws -> Void = {
            try await self.markSent(key, flightID: flightID, seed: sentSeed)
        }
        func request(_ grant: GrantRequest, beforeFirstSend: @Sendable () async throws -> Void) async throws
            -> TokenResponse
        {
            try await requestTokens(
                session, via: endpointClient, deadline: flight.deadline, dpop: dpop, beforeFirstSend: beforeFirstSend
            ) { () throws(AuthError) in
                try endpointClient.makeRequest(
                    endpoint: endpoint, grant: grant, configuration: configuration, credential: credential)
            }
        }
        /// The profile's own grant request (reading its assertion or subject token now).
        func ownGrant() async throws -> GrantRequest {
            guard
                let grant = try await freshGrant(
                    configuration, endpointClient: endpointClient, deadline: flight.deadline)
            else { throw decisions.nothingToSend }
            return grant
        }
        /// The own grant sent; a refused assertion from another session is asked for again once.
        func ownGrantResponse(beforeFirstSend: @Sendable () async throws -> Void) async throws -> TokenResponse {
            let grant = try await ownGrant()
            do {
                return try await request(grant, beforeFirstSend: beforeFirstSend)
            } catch let error as AuthError where error.oauthError == "invalid_grant" {
                guard try await invalidateRefusedAssertion(configuration, grant) else { throw error }
                return try await request(ownGrant(), beforeFirstSend: {})
            }
        }
        let response: TokenResponse
        if let refreshToken = send.refreshToken {
            do {
                response = try await request(.refresh(refreshToken, configuration), beforeFirstSend: beforeSend)
            } catch let error as AuthError where error.oauthError == "invalid_grant" {
                switch decisions.refused(snapshot(session, flight)) {
                case .fail(let error): throw error
                case .requireInteraction(let ended):
                    try await dropRefreshState(session, refused: refreshToken)
                    session.interactionRequired = true
                    session.lastError = ended
                    throw ended
                case .fallBackToOwnGrant:
                    try await dropRefreshState(session, refused: refreshToken)
                    log.info("refresh token refused for \(key); acquiring afresh with \(configuration.grant.name)")
                    send = .ownGrant
                    response = try await ownGrantResponse(beforeFirstSend: {})
                }
            }
        } else {
            response = try await ownGrantResponse(beforeFirstSend: beforeSend)
        }
        switch decisions.answered(send, snapshot(session, flight)) {
        case .revokeAndFail(let error):
            await revokeAtServers([
                TokenRevocation(
                    key: key, configuration: configuration, refreshToken: response.refreshToken,
                    accessToken: response.accessToken)
            ])
            throw error
        case .commit(let spent):
            var identity: LoginIdentity?
            if let spent { identity = try await validateRenewalIDToken(response, session: session, spent: spent) }
            let token = try await commit(
                response, previousRefreshToken: spent, session: session, storeKey: storeKey,
                logoutEpoch: logoutEpoch, generation: flight.generation, subject: identity?.rawSubject,
                signedWith: dpop?.key)
            if let identity {
                session.identity = identity
                session.idToken = response.idToken
            }
            return token
        }
    }

    /// What the flight's decisions look at (``RenewalFlight/Snapshot``), read now.
    private func snapshot(_ session: Session, _ flight: Flight) -> RenewalFlight.Snapshot {
        RenewalFlight.Snapshot(
            loggedOut: session.generation != flight.generation,
            usableToken: usableToken(session, now: clock.now, minimumValidity: flight.minimumValidity),
            callers: !flight.waiters.isEmpty, refreshToken: session.refreshToken,
            unsavedRotation: session.unsavedRotation != nil, interactionRequired: session.interactionRequired,
            lastError: session.lastError)
    }

    /// The configured seed (resolved now unless resolving the store key just did: `resolved`) and
    /// whether it is spent: sent before, by this process or (the store says) by another.
    private func configuredSeed(_ resolved: String?, _ configuration: OAuthClientConfiguration) async throws
        -> (value: String, spent: Bool)
    {
        var seed = resolved
        if seed == nil { seed = try await resolveSeed(configuration) }
        guard let seed else { throw AuthError.configuration("the refresh_token seed could not be resolved") }
        let digest = Self.digest(seed)
        let spentElsewhere: Bool
        do {
            spentElsewhere = try await store.isSeedSpent(StoreKey.hex(digest))
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.storage("the token store could not be read")
        }
        return (seed, consumedSeeds.contains(digest) || spentElsewhere)
    }

    /// The session's logout epoch in the store (see ``TokenStore/logoutEpoch(_:)``).
    func readLogoutEpoch(_ storeKey: StoreKey) async throws -> Int64 {
        do {
            return try await store.logoutEpoch(storeKey)
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.storage("the token store could not be read")
        }
    }

    /// How much longer than its flight's own bound a renewal lease lasts: a holder that dies
    /// mid-request is taken over by the pid check at once; this margin only covers a holder that
    /// hangs (its lease then lapses).
    static let leaseMargin: TimeInterval = 30

    /// The configured seed of a `refresh_token` grant (`nil` for other grants).
    private func resolveSeed(_ configuration: OAuthClientConfiguration) async throws -> String? {
        guard case .refreshToken(let seed) = configuration.grant else { return nil }
        do {
            return try await seed.resolve()
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.configuration("the refresh_token seed could not be resolved")
        }
    }

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

    /// Reads the session's entry and makes it the session's state.
    /// What is read is adopted unless the session was logged out meanwhile: the read predates the
    /// logout, and the session stays logged out.
    func reload(_ session: Session, _ storeKey: StoreKey) async throws {
        let generation = session.generation
        let stored: StoredTokens?
        do {
            stored = try await store.load(storeKey)
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.storage("the token store could not be read")
        }
        guard session.generation == generation else { return }
        session.loaded = true
        adoptStored(stored, into: session)
    }

    /// Builds the token, commits it (with the rotated or kept refresh token) to the store, and only
    /// then makes it the session's refresh state. A store failure fails the renewal but keeps the
    /// rotated refresh token in memory (the old one is already spent at the server).
    ///
    /// A logout since `logoutEpoch` (in any process: the store refuses the save) or since
    /// `generation` (in this one, while the save was under way) wins: nothing of the response is
    /// kept, its tokens are revoked, and the caller gets ``AuthError/loggedOut``.
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
        let revision: Int64?
        do {
            revision = try await store.save(stored, for: storeKey, logoutEpoch: logoutEpoch)
        } catch {
            guard session.generation == generation else { throw AuthError.loggedOut }
            let failure = (error as? AuthError) ?? AuthError.storage("the new tokens could not be committed")
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
            throw response.refreshToken == nil ? failure : failure.keptInMemory(session.key)
        }
        // Re-checked after the save's await: a logout in this process landing during the save is
        // not undone (its own store removal, before or after this save, leaves the store empty).
        guard let revision, session.generation == generation else {
            if revision == nil, session.generation == generation {
                log.info("\(session.key) was logged out in another process; the new tokens are not kept")
                forgetTokens(session)
            }
            await revokeAtServers([
                TokenRevocation(
                    key: session.key, configuration: session.configuration, refreshToken: response.refreshToken,
                    accessToken: response.accessToken)
            ])
            throw AuthError.loggedOut
        }
        session.revision = revision
        session.refreshToken = refreshToken
        session.unsavedRotation = nil
        session.tokenFromStore = false
        return token
    }

    /// Sends a grant request of `session` (``TokenEndpointClient/send(deadline:dpop:beforeFirstSend:build:)``).
    /// An answer that downgrades a DPoP request to a bearer token is refused, and what it issued
    /// is revoked at the server: nothing the server issued is left live and forgotten.
    func requestTokens(
        _ session: Session, via endpointClient: TokenEndpointClient, deadline: Date, dpop: DPoPSigning?,
        beforeFirstSend: @Sendable () async throws -> Void, build: () throws(AuthError) -> HTTPRequest
    ) async throws -> TokenResponse {
        do {
            return try await endpointClient.send(
                deadline: deadline, dpop: dpop, beforeFirstSend: beforeFirstSend, build: build)
        } catch let downgrade as DPoPDowngrade {
            log.warn("\(session.key): \(DPoPDowngrade.reason); revoking what the server issued")
            await revokeAtServers([
                TokenRevocation(
                    key: session.key, configuration: session.configuration,
                    refreshToken: downgrade.response.refreshToken, accessToken: downgrade.response.accessToken)
            ])
            throw AuthError.invalidTokenResponse(DPoPDowngrade.reason)
        }
    }

    /// DPoP: what the session's token requests are signed with, making its key first when it has
    /// none (the key is kept with the tokens the request brings); `nil` for a bearer session.
    func dpopSigning(_ session: Session) throws(AuthError) -> DPoPSigning? {
        guard session.configuration.dpop else { return nil }
        if session.dpopKey == nil {
            guard let key = DPoPKey.generate() else { throw .configuration("a DPoP key could not be made (libcrypto)") }
            session.dpopKey = key
            log.debug("\(session.key): made a DPoP key (\(key))")
        }
        guard let key = session.dpopKey else { return nil }
        return DPoPSigning(key: key, nonces: dpopNonces)
    }

    /// Mutual TLS: the client certificate a certificate-bound token's requests present (read once
    /// per process unless an acquisition read it again).
    func clientIdentity(for key: SessionKey) async throws -> ClientIdentity {
        guard let session = sessions[key] else { throw AuthError.configuration("unknown session \(key)") }
        if let identity = session.clientIdentity { return identity }
        let identity = try await ClientCredential.identity(session.configuration)
        session.clientIdentity = identity
        return identity
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

    /// Where tokens are fetched: discovery (verifying the issuer and the client-authentication
    /// method) when an issuer is configured, with `token_url` overriding the endpoint.
    func tokenEndpoint(
        for configuration: OAuthClientConfiguration, discovery: DiscoveryClient, deadline: Date
    ) async throws -> String {
        guard let issuer = configuration.issuer else {
            guard let tokenURL = configuration.tokenURL else {
                throw AuthError.configuration("either issuer or token_url is required")
            }
            return tokenURL
        }
        let metadata = try await discovery.metadata(for: issuer, deadline: deadline)
        // A public client (`none`) sends no secret, so there is nothing to agree on: servers often
        // leave `none` out of the list yet accept PKCE public clients (Django OAuth Toolkit does).
        // A registration the server accepted is never refused afterwards (SPEC §9.4).
        if configuration.clientAuth != .none, !configuration.clientAuthRegistered,
            let methods = metadata.tokenEndpointAuthMethodsSupported,
            !methods.contains(configuration.clientAuth.rawValue)
        {
            throw AuthError.configuration(
                "client_auth \(configuration.clientAuth.rawValue) is not supported by the issuer (it supports: "
                    + ServerText(methods.joined(separator: ", ")).value + ")")
        }
        // RFC 8705 §5: a mutual-TLS client uses the server's alias (an explicit token_url wins).
        return configuration.tokenURL
            ?? metadata.endpoint(
                "token_endpoint", plain: metadata.tokenEndpoint, mutualTLS: configuration.clientAuth.isMutualTLS)
            ?? metadata.tokenEndpoint
    }

    /// The SHA-256 digest of `value` (consumed seeds are remembered by digest, not by value).
    static func digest(_ value: String) -> [UInt8] { LibCrypto.sha256(Array(value.utf8)) }
}
