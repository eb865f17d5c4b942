import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

extension TokenManager {
    /// The issuer's signing keys from the verified `jwks_uri`: cached, or fetched again when
    /// `refresh` (an unknown `kid`).
    func signingKeys(for key: SessionKey, metadata: AuthorizationServerMetadata?, deadline: Date, refresh: Bool)
        async throws
        -> JSONWebKeySet
    {
        guard let uri = metadata?.jwksURI else {
            throw AuthError.invalidIDToken("the issuer's verified metadata names no jwks_uri")
        }
        if !refresh, let cached = jwksCache[uri] { return cached }
        guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        let request = HTTPRequest(method: "GET", url: uri, headers: headers, timeout: timeout)
        let response = try await AuthorizationServerCall.send(
            request, to: "JWKS endpoint", over: traffic(for: key).endpoint.transport)
        guard response.status == 200 else {
            // An outage (5xx, 408, 429) is the network's kind: a renewal waiting for the keys fails
            // as unreachable, not as refused, and is tried again by the next caller.
            let reason = "the JWKS could not be fetched (HTTP \(response.status))"
            let status = response.status
            throw AuthorizationServerCall.isTransient(status: status)
                ? AuthError.transport(reason) : AuthError.invalidIDToken(reason)
        }
        let keys = try JSONWebKeySet.parse(response.body)
        jwksCache[uri] = keys
        return keys
    }

    /// Validates an ID token (OpenID Connect Core §3.1.3.7): signature by one of the issuer's keys
    /// (one JWKS refetch on an unknown `kid`), `iss`, `aud`/`azp`, `exp`/`iat`, `nonce`.
    func validateIDToken(
        _ idToken: String?, key: SessionKey, configuration: OAuthClientConfiguration,
        metadata: AuthorizationServerMetadata?,
        nonce: String?, keys prefetched: Task<JSONWebKeySet, any Error>?
    ) async throws -> LoginIdentity {
        guard let idToken else { throw AuthError.invalidIDToken("the token response has no id_token") }
        guard let issuer = configuration.issuer else {
            throw AuthError.configuration("an openid profile needs an issuer (its keys come from discovery)")
        }
        let jws = try CompactJWS.parse(idToken)
        guard IDTokenClaims.algorithms.contains(jws.algorithm) else {
            throw AuthError.invalidIDToken("alg \(ServerText(jws.algorithm).value) is not accepted")
        }
        let deadline = clock.now.addingTimeInterval(configuration.acquisitionTimeout.timeInterval)
        var keySet: JSONWebKeySet
        if let prefetched {
            keySet = try await prefetched.value
        } else {
            keySet = try await signingKeys(for: key, metadata: metadata, deadline: deadline, refresh: false)
        }
        var candidates = Self.candidates(keySet, jws)
        if candidates.isEmpty, jws.keyID != nil {
            keySet = try await signingKeys(for: key, metadata: metadata, deadline: deadline, refresh: true)
            candidates = Self.candidates(keySet, jws)
            guard !candidates.isEmpty else { throw AuthError.invalidIDToken("its kid is not among the issuer's keys") }
        }
        guard
            candidates.contains(where: {
                JOSESignature.verify(
                    algorithm: jws.algorithm, key: $0, input: jws.signingInput, signature: jws.signature)
            })
        else { throw AuthError.invalidIDToken("its signature does not verify with the issuer's keys") }
        let claims = try IDTokenClaims.validate(
            jws.payload, issuer: issuer, clientID: configuration.clientID, nonce: nonce, now: clock.now)
        return LoginIdentity(subject: claims.subject, email: claims.email, name: claims.name)
    }

    /// The keys that may have signed `jws`: those with its `kid` (all, when it names none).
    private static func candidates(_ set: JSONWebKeySet, _ jws: CompactJWS) -> [JSONWebKey] {
        guard let kid = jws.keyID else { return set.keys }
        return set.keys.filter { $0.keyID == kid }
    }

    /// Fetches (or finds cached) the issuer's signing keys before a renewal of an OpenID Connect
    /// session is sent (see ``validateRenewalIDToken(_:session:spent:)``).
    func prepareRenewalIDTokenKeys(_ session: Session, deadline: Date) async throws {
        guard let issuer = session.configuration.issuer else { return }
        let metadata = try await traffic(for: session.key).discovery.metadata(for: issuer, deadline: deadline)
        _ = try await signingKeys(for: session.key, metadata: metadata, deadline: deadline, refresh: false)
    }

    /// The ID token a refresh returned (OpenID Connect Core §12.2), validated as at login (no
    /// nonce: none was sent), whose `sub` must be the person's who logged in (when this process
    /// knows it). `nil` without an ID token (or for a session that is not OpenID Connect).
    ///
    /// A token that fails ends the session: nothing of the response is committed, what it issued
    /// is revoked, the stored session is removed (the refresh token `spent` may be spent already),
    /// and the caller gets ``AuthError/loginRequired(_:scopes:)`` (a refused renewal: `auth-failed`).
    /// A `sub` that changed means the server answered for another person.
    func validateRenewalIDToken(_ response: TokenResponse, session: Session, spent: String) async throws
        -> LoginIdentity?
    {
        let configuration = session.configuration
        guard configuration.isOpenIDConnect, response.idToken != nil else { return nil }
        let generation = session.generation
        let reason: String
        do {
            let metadata: AuthorizationServerMetadata?
            if let issuer = configuration.issuer {
                let deadline = clock.now.addingTimeInterval(configuration.acquisitionTimeout.timeInterval)
                metadata = try await traffic(for: session.key).discovery.metadata(for: issuer, deadline: deadline)
            } else {
                metadata = nil
            }
            let identity = try await validateIDToken(
                response.idToken, key: session.key, configuration: configuration, metadata: metadata, nonce: nil,
                keys: nil)
            guard let known = session.identity, known.rawSubject != identity.rawSubject else { return identity }
            reason = "it names another person (its sub is not the one who logged in)"
        } catch let error as AuthError {
            if case .invalidIDToken(let why) = error {
                reason = "it is not valid: \(why)"
            } else {
                reason = error.description
            }
        }
        guard session.generation == generation else { throw AuthError.loggedOut }
        log.warn("the ID token of the renewal of \(session.key) was refused: \(reason); the session ends")
        await revokeAtServers([
            TokenRevocation(
                key: session.key, configuration: configuration, refreshToken: response.refreshToken,
                accessToken: response.accessToken)
        ])
        try await dropRefreshState(session, refused: spent)
        session.token = nil
        session.identity = nil
        session.idToken = nil
        session.interactionRequired = true
        let ended = AuthError.loginRequired("the ID token of the renewal was refused (\(reason))")
        session.lastError = ended
        throw ended
    }
}
