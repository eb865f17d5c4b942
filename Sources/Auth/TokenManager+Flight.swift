import CCrypto
import Foundation
import HTTP
import Logging

extension TokenManager {
    /// What a flight produced.
    enum FlightOutcome {
        /// A token loaded from the store, still usable: nothing was sent.
        case stored(Token)
        /// A token obtained from the token endpoint.
        case obtained(Token)
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
        flight.task = Task { await self.runFlight(key, flightID: flightID) }
        return flight
    }

    /// Called by the endpoint client just before the first token request goes out: marks the
    /// flight as sent, or refuses (CancellationError) when it was abandoned.
    /// `seed`, when given, is the configured refresh-token seed being sent: it is recorded as
    /// consumed from then on.
    func markSent(_ key: SessionKey, flightID: UInt64, seed: String? = nil) throws {
        guard !closed, let flight = sessions[key]?.flight, flight.id == flightID, !flight.waiters.isEmpty,
            !Task.isCancelled
        else { throw CancellationError() }
        flight.sent = true
        if let seed { consumedSeeds.insert(Self.digest(seed)) }
    }

    private func runFlight(_ key: SessionKey, flightID: UInt64) async {
        defer { detached[flightID] = nil }
        guard let session = sessions[key], let flight = session.flight, flight.id == flightID else { return }
        let result: Result<FlightOutcome, AuthError>
        do {
            result = .success(try await acquire(session, flight))
        } catch let error as AuthError {
            result = .failure(error)
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
        case .success(.obtained(let token)):
            session.token = token
            session.invalidated = false
            session.lastError = nil
            if flight.isRenewal { session.counters.renewals += 1 } else { session.counters.acquisitions += 1 }
            answer = .success(token)
        case .failure(let error):
            if error != .cancelled { session.lastError = error }
            if flight.isRenewal && error.isRefusal {
                log.warn("token renewal refused for \(session.key): \(error.description)")
                emit(.authFailed(AuthFailure(key: session.key, error: error)))
            }
            answer = .failure(error)
        }
        for waiter in waiters.values {
            waiter.timer?.cancel()
            waiter.continuation.resume(with: answer)
        }
    }

    /// Loads the store if needed, then obtains a token (refresh first, client credentials as the
    /// grant allows) and commits it to the store. Re-checks state after every await.
    private func acquire(_ session: Session, _ flight: Flight) async throws -> FlightOutcome {
        let key = session.key
        if !session.loaded {
            try await loadStoredTokens(session)
            if let token = usableToken(session, now: clock.now, minimumValidity: flight.minimumValidity) {
                return .stored(token)
            }
        }
        try Task.checkCancellation()
        flight.isRenewal = session.token != nil
        let configuration = session.configuration
        let traffic = traffic(for: key)
        let endpointClient = traffic.endpoint
        let endpoint = try await tokenEndpoint(
            for: configuration, discovery: traffic.discovery, deadline: flight.deadline)
        let secret = try await clientSecret(for: configuration)
        var refreshToken = session.refreshToken
        var seedValue: String?
        if refreshToken == nil, case .refreshToken(let seed) = configuration.grant {
            let resolved: String
            do {
                resolved = try await seed.resolve()
            } catch {
                throw AuthError.configuration("the refresh_token seed could not be resolved")
            }
            // A seed this process already sent is spent (rotated or refused): sending it again would
            // be a replay, and a server with reuse protection would revoke the whole token family.
            guard !consumedSeeds.contains(Self.digest(resolved)) else {
                throw AuthError.interactionRequired(
                    "the configured refresh token was already used; provision a new one")
            }
            refreshToken = resolved
            seedValue = resolved
        }
        let flightID = flight.id
        let beforeSend: @Sendable () async throws -> Void = { [seedValue] in
            try await self.markSent(key, flightID: flightID, seed: seedValue)
        }
        let response: TokenResponse
        var usedRefreshToken: String?
        if let refreshToken {
            let request = try endpointClient.makeRequest(
                endpoint: endpoint, grant: .refresh(refreshToken, configuration), configuration: configuration,
                secret: secret)
            do {
                response = try await endpointClient.send(
                    request, deadline: flight.deadline, beforeFirstSend: beforeSend)
                usedRefreshToken = refreshToken
            } catch let error as AuthError where error.oauthError == "invalid_grant" {
                try await dropRefreshState(session, refused: refreshToken)
                guard case .clientCredentials = configuration.grant else {
                    session.interactionRequired = true
                    let ended = AuthError.interactionRequired("the refresh token was refused (invalid_grant)")
                    session.lastError = ended
                    throw ended
                }
                log.info("refresh token refused for \(key); acquiring afresh with client credentials")
                let fresh = try endpointClient.makeRequest(
                    endpoint: endpoint, grant: .clientCredentials(configuration), configuration: configuration,
                    secret: secret)
                response = try await endpointClient.send(fresh, deadline: flight.deadline, beforeFirstSend: {})
            }
        } else {
            let request = try endpointClient.makeRequest(
                endpoint: endpoint, grant: .clientCredentials(configuration), configuration: configuration,
                secret: secret)
            response = try await endpointClient.send(request, deadline: flight.deadline, beforeFirstSend: beforeSend)
        }
        guard session.generation == flight.generation else {
            throw AuthError.cancelled  // logged out meanwhile: commit nothing
        }
        return .obtained(try await commit(response, previousRefreshToken: usedRefreshToken, session: session))
    }

    /// Builds the token, commits it (with the rotated or kept refresh token) to the store, and only
    /// then makes it the session's refresh state. A store failure fails the renewal but keeps the
    /// rotated refresh token in memory (the old one is already spent at the server).
    private func commit(_ response: TokenResponse, previousRefreshToken: String?, session: Session) async throws
        -> Token
    {
        let now = clock.now
        let refreshToken = response.refreshToken ?? previousRefreshToken
        let token = Token(
            accessToken: response.accessToken, tokenType: response.tokenType, receivedAt: now,
            expiresAt: response.expiresIn.map { now.addingTimeInterval(TimeInterval($0)) }, refreshToken: refreshToken,
            scope: response.scope, version: nextID())
        let stored = StoredTokens(
            accessToken: token.accessToken, tokenType: token.tokenType, receivedAt: now, expiresAt: token.expiresAt,
            refreshToken: refreshToken, scope: token.scope)
        do {
            try await store.save(stored, for: session.key)
        } catch {
            session.refreshToken = refreshToken
            session.token = nil
            throw AuthError.storage("the new tokens could not be committed")
        }
        session.refreshToken = refreshToken
        return token
    }

    /// Forgets a refused refresh token (memory and store), unless another one replaced it.
    private func dropRefreshState(_ session: Session, refused: String) async throws {
        guard session.refreshToken == nil || session.refreshToken == refused else { return }
        session.refreshToken = nil
        session.token = session.token.map {
            Token(
                accessToken: $0.accessToken, tokenType: $0.tokenType, receivedAt: $0.receivedAt,
                expiresAt: $0.expiresAt, refreshToken: nil, scope: $0.scope, version: $0.version)
        }
        do {
            try await store.remove(session.key)
        } catch {
            throw AuthError.storage("the refused refresh token could not be removed")
        }
    }

    /// Reads the session's entry from the store, once (re-checked after the read).
    func loadStoredTokens(_ session: Session) async throws(AuthError) {
        guard !session.loaded else { return }
        let stored: StoredTokens?
        do {
            stored = try await store.load(session.key)
        } catch {
            throw .storage("the token store could not be read")
        }
        if !session.loaded {
            session.loaded = true
            adopt(stored, into: session)
        }
    }

    /// Takes what the store held.
    private func adopt(_ stored: StoredTokens?, into session: Session) {
        guard let stored else { return }
        if let refreshToken = stored.refreshToken {
            Redactor.shared.register(refreshToken)
            session.refreshToken = refreshToken
        }
        if let accessToken = stored.accessToken {
            Redactor.shared.register(accessToken)
            session.token = Token(
                accessToken: accessToken, tokenType: stored.tokenType, receivedAt: stored.receivedAt ?? clock.now,
                expiresAt: stored.expiresAt, refreshToken: stored.refreshToken, scope: stored.scope, version: nextID())
        }
    }

    /// Where tokens are fetched: discovery (verifying the issuer and the client-authentication
    /// method) when an issuer is configured, with `token_url` overriding the endpoint.
    private func tokenEndpoint(
        for configuration: OAuthClientConfiguration, discovery: DiscoveryClient, deadline: Date
    ) async throws -> String {
        guard let issuer = configuration.issuer else {
            guard let tokenURL = configuration.tokenURL else {
                throw AuthError.configuration("either issuer or token_url is required")
            }
            return tokenURL
        }
        let metadata = try await discovery.metadata(for: issuer, deadline: deadline)
        if let methods = metadata.tokenEndpointAuthMethodsSupported,
            !methods.contains(configuration.clientAuth.rawValue)
        {
            throw AuthError.configuration(
                "client_auth \(configuration.clientAuth.rawValue) is not supported by the issuer (it supports: "
                    + methods.map { AuthError.clean($0) }.joined(separator: ", ") + ")")
        }
        return configuration.tokenURL ?? metadata.tokenEndpoint
    }

    private func clientSecret(for configuration: OAuthClientConfiguration) async throws -> String? {
        guard configuration.clientAuth != .none, let provider = configuration.clientSecret else { return nil }
        do {
            return try await provider.resolve()
        } catch {
            throw AuthError.configuration("the client secret could not be resolved")
        }
    }

    /// The SHA-256 digest of `value` (consumed seeds are remembered by digest, not by value).
    static func digest(_ value: String) -> [UInt8] {
        let bytes = Array(value.utf8)
        var output = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in SHA256(input.baseAddress, input.count, out.baseAddress) }
        }
        return output
    }
}
