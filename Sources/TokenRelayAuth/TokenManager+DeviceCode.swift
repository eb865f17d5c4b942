import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

extension TokenManager {
    /// The device authorization grant (RFC 8628): asks for a device code, prompts the person with
    /// the user code, and polls the token endpoint until the login is approved, refused or expired
    /// (honouring `slow_down`). Any poll may be the approved one, so each is marked sent first: once
    /// sent it runs to completion and is committed (SPEC §5.2).
    func deviceCodeLogin(
        _ session: Session, _ flight: LoginFlight, settings: InteractiveLogin, metadata: AuthorizationServerMetadata?,
        endpoint: String, credential: ClientCredential?, opener: (@Sendable (String) async -> Void)?
    ) async throws -> TokenResponse {
        let configuration = session.configuration
        let endpointClient = traffic(for: session.key).endpoint
        let aliased = metadata?.endpoint(
            "device_authorization_endpoint", plain: metadata?.deviceAuthorizationEndpoint,
            mutualTLS: configuration.clientAuth.isMutualTLS)
        guard let deviceEndpoint = settings.deviceAuthorizationURL ?? aliased else {
            throw AuthError.configuration(
                "no device authorization endpoint: set device_authorization_url, or an issuer whose metadata names one")
        }
        var form = FormBody()
        if !configuration.scopes.isEmpty { form.add("scope", configuration.scopes.joined(separator: " ")) }
        if let audience = configuration.audience { form.add("audience", audience) }
        for resource in configuration.resources { form.add("resource", resource) }
        for (name, value) in settings.authorizationParameters { form.add(name, value) }
        let authorizationRequest = try TokenEndpointClient.authenticatedPost(
            endpoint: deviceEndpoint, what: "device authorization endpoint", form: form, configuration: configuration,
            credential: credential, now: clock.now)
        let authorization = try await endpointClient.deviceAuthorization(
            authorizationRequest, deadline: min(flight.deadline, clock.now.addingTimeInterval(30)))
        let started = clock.now
        let expiresAt = started.addingTimeInterval(TimeInterval(authorization.expiresIn))
        let end = min(expiresAt, flight.deadline)
        prompt(
            session, flight, kind: .device, url: authorization.verificationURI, userCode: authorization.userCode,
            verificationURIComplete: authorization.verificationURIComplete, expiresAt: end,
            opener: opener, openURL: authorization.verificationURIComplete ?? authorization.verificationURI)
        var interval = TimeInterval(authorization.interval)
        var polls = 0
        while true {
            let wake = clock.now.addingTimeInterval(interval)
            guard wake < end else {
                throw AuthError.loginRequired(
                    end == flight.deadline
                        ? "the device login was not approved within login_timeout"
                        : "the device code expired before the login was approved")
            }
            try await clock.sleep(until: wake)
            guard session.login === flight, session.generation == flight.generation else { throw CancellationError() }
            polls += 1
            let dpop = try dpopSigning(session)
            // Any poll may be the one that is approved (the server then issues the tokens and
            // spends the device code): once sent, it runs to completion and is committed, even if
            // every caller left or the manager is closing (SPEC §5.2). It used to be marked only
            // after its answer, which a closing manager then dropped.
            try markLoginSent(session, flight)
            do {
                let response = try await requestTokens(
                    session, via: endpointClient, deadline: end, dpop: dpop, beforeFirstSend: {}
                ) {
                    () throws(AuthError) in
                    try endpointClient.makeRequest(
                        endpoint: endpoint, grant: .deviceCode(authorization.deviceCode, configuration),
                        configuration: configuration, credential: credential)
                }
                log.info("device login for \(session.key) approved after \(polls) poll(s)")
                return response
            } catch let error as AuthError {
                // Not approved: nothing was issued, so the login may stop between polls again.
                flight.sent = false
                if flight.waiters.isEmpty || closed { throw CancellationError() }
                switch error.oauthError {
                case "authorization_pending":
                    log.debug("device login for \(session.key): poll \(polls) pending")
                case "slow_down":
                    interval += 5
                    log.debug("device login for \(session.key): slow_down, polling every \(Int(interval)) s")
                case "access_denied":
                    throw AuthError.loginRefused(
                        error: "access_denied", description: error.oauthErrorDescription.map { ServerText($0) })
                case "expired_token":
                    throw AuthError.loginRequired("the device code expired before the login was approved")
                default:
                    throw error
                }
            }
        }
    }
}
