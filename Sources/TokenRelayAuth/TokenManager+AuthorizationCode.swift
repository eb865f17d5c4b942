import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

extension TokenManager {
    /// The authorization-code login (SPEC §5.4): PKCE, the loopback listener, the person's browser,
    /// the callback's checks (`state` in the listener, RFC 9207 `iss` here), the code exchange.
    func authorizationCodeLogin(
        _ session: Session, _ flight: LoginFlight, settings: InteractiveLogin, ports: [Int], path: String,
        metadata: AuthorizationServerMetadata?, endpoint: String, credential: ClientCredential?,
        opener: (@Sendable (String) async -> Void)?
    ) async throws -> LoginResult {
        let configuration = session.configuration
        let endpointClient = traffic(for: session.key).endpoint
        guard let base = settings.authorizationURL ?? metadata?.authorizationEndpoint else {
            throw AuthError.configuration(
                "no authorization endpoint: set authorization_url, or an issuer whose metadata names one")
        }
        _ = try EndpointPolicy.check(base, what: "authorization endpoint")
        let secrets = try LoginSecrets.make()
        let listener = try LoopbackRedirectListener.bind(ports: ports, path: path)
        defer { listener.close() }
        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", configuration.clientID), ("redirect_uri", listener.redirectURI),
            ("code_challenge", secrets.challenge), ("code_challenge_method", "S256"), ("state", secrets.state),
        ]
        if !configuration.scopes.isEmpty { query.append(("scope", configuration.scopes.joined(separator: " "))) }
        if configuration.isOpenIDConnect { query.append(("nonce", secrets.nonce)) }
        if let audience = configuration.audience { query.append(("audience", audience)) }
        for resource in configuration.resources { query.append(("resource", resource)) }
        query += settings.authorizationParameters
        let url = RequestURL.appendingQuery(query, to: base)
        // Shown whole (a cut URL would not work): one past the prompt's bound is refused.
        guard url.utf8.count <= LoginPrompt.maximumURLBytes else {
            throw AuthError.configuration(
                "the authorization URL is longer than \(LoginPrompt.maximumURLBytes) bytes (authorization parameters?)")
        }
        // The person may paste the redirected URL instead (SPEC §13.2): whichever comes first.
        let (pasted, pasteSink) = AsyncStream.makeStream(of: RedirectCallback.self)
        flight.paste = PastedCallbacks(
            origin: "http://127.0.0.1:\(listener.port)", path: listener.path, state: secrets.state,
            issuer: configuration.issuer, issuerRequired: metadata?.authorizationResponseIssParameterSupported == true,
            sink: pasteSink)
        prompt(session, flight, kind: .browser, url: url, opener: opener)

        let callback: RedirectCallback
        let answer: BrowserAnswer
        let waited: Result<(RedirectCallback, BrowserAnswer), any Error>
        do {
            waited = .success(
                try await withThrowingTaskGroup(of: (RedirectCallback, BrowserAnswer)?.self) { group in
                    group.addTask { try await listener.callback(state: secrets.state) }
                    group.addTask {
                        for await callback in pasted { return (callback, BrowserAnswer(fd: nil)) }
                        throw CancellationError()
                    }
                    let deadline = flight.deadline
                    group.addTask { [clock] in
                        try await clock.sleep(until: deadline)
                        return nil
                    }
                    defer { group.cancelAll() }
                    guard let first = try await group.next(), let received = first else {
                        throw AuthError.loginRequired("the login was not completed within login_timeout")
                    }
                    return received
                })
        } catch {
            waited = .failure(error)
        }
        flight.paste = nil
        pasteSink.finish()
        (callback, answer) = try waited.get()
        let callbackAt = ContinuousClock.now
        do {
            // RFC 9207 before anything the callback says is acted on (or shown).
            try Self.checkIssuer(
                callback.issuers, expected: configuration.issuer,
                required: metadata?.authorizationResponseIssParameterSupported == true)
            let code: String
            switch callback.outcome {
            case .refused(let error, let description):
                throw AuthError.loginRefused(error: ServerText(error), description: description.map { ServerText($0) })
            case .code(let value):
                code = value
            }
            guard session.consumedCodes.insert(Self.digest(code)) else {
                throw AuthError.loginRefused(
                    error: "invalid_grant", description: "this authorization code was already exchanged")
            }
            try markLoginSent(session, flight)
            let deadline = clock.now.addingTimeInterval(configuration.acquisitionTimeout.timeInterval)
            // The JWKS is fetched while the code is exchanged (OpenID Connect).
            let keysTask: Task<JSONWebKeySet, any Error>? =
                configuration.isOpenIDConnect
                ? Placement.throwingTask(.executor(taskExecutor)) { [self, key = session.key] in
                    try await self.signingKeys(for: key, metadata: metadata, deadline: deadline, refresh: false)
                }
                : nil
            let dpop = try dpopSigning(session)
            let response: TokenResponse
            do {
                response = try await requestTokens(
                    session, via: endpointClient, deadline: deadline, dpop: dpop, beforeFirstSend: {}
                ) {
                    () throws(AuthError) in
                    try endpointClient.makeRequest(
                        endpoint: endpoint,
                        grant: .authorizationCode(
                            code, redirectURI: listener.redirectURI, verifier: secrets.verifier, configuration),
                        configuration: configuration, credential: credential)
                }
            } catch {
                keysTask?.cancel()
                throw error
            }
            let result = try await store(
                response, session, flight, nonce: secrets.nonce, metadata: metadata, keys: keysTask)
            let elapsed = ContinuousClock.now - callbackAt
            log.info(
                "login for \(session.key) stored \(Int(elapsed.timeInterval * 1000)) ms after the browser's callback")
            answer.send(.success)
            return result
        } catch {
            let reason: String
            if let error = error as? AuthError {
                reason = error.description
            } else {
                reason = "The login was cancelled."
            }
            answer.send(.failure(reason))
            throw error
        }
    }

    /// RFC 9207 (SPEC §9.5): the callback's `iss`, when present, must equal the expected issuer
    /// (simple string comparison); when the server's metadata says it sends `iss`
    /// (`authorization_response_iss_parameter_supported`), it must be present. Without a configured
    /// issuer there is nothing to compare with, and `iss` is not checked. A failure says nothing of
    /// what the callback carried (its `error` is not shown: it may come from another server).
    static func checkIssuer(_ issuers: [String], expected: String?, required: Bool) throws(AuthError) {
        guard let expected else { return }
        switch issuers.count {
        case 0:
            guard !required else {
                throw .wrongIssuer("it carries no iss, which the authorization server's metadata says it sends")
            }
        case 1:
            guard issuers[0] == expected else { throw .wrongIssuer("its iss is not the configured issuer") }
        default:
            throw .wrongIssuer("it carries several iss parameters")
        }
    }
}
