import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

/// A flight's renewal under the lease: where the token endpoint is, what is sent with what proof, and the answer
/// committed (``RenewalFlight`` decides each step; see TokenManager+Flight.swift for the flight around it).
extension TokenManager {
    /// Under the lease, with no usable token: sends what `decisions` choose (falling back to the
    /// profile's own grant when they say so) and commits the answer, or revokes it when the session
    /// was logged out meanwhile. `resolvedSeed`: the seed, if resolving the store key just did.
    func renew(
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

    /// The configured seed (resolved now unless resolving the store key just did: `resolved`) and
    /// whether it is spent: sent before, by this process or (the store says) by another.
    private func configuredSeed(_ resolved: String?, _ configuration: OAuthClientConfiguration) async throws
        -> (value: String, spent: Bool)
    {
        var seed = resolved
        if seed == nil { seed = try await resolveSeed(configuration) }
        guard let seed else { throw AuthError.configuration("the refresh_token seed could not be resolved") }
        let digest = Self.digest(seed)
        let spentElsewhere = try await storeCall { try await store.isSeedSpent(StoreKey.hex(digest)) }
        return (seed, consumedSeeds.contains(digest) || spentElsewhere)
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
}
