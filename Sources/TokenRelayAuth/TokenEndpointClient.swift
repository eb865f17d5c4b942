import FoundationEssentials
import Glibc
import TokenRelayHTTP
import TokenRelayLogging

/// Bounded exponential backoff with jitter for transient token endpoint failures.
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included.
    public var maximumAttempts: Int
    /// The delay before the first retry.
    public var initialDelay: Duration
    /// The largest delay between attempts (a server's `Retry-After` may ask for more, within the deadline).
    public var maximumDelay: Duration

    /// Creates a policy (defaults: 5 attempts, 250 ms doubling up to 4 s).
    public init(
        maximumAttempts: Int = 5, initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(4)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The delay before retry number `retry` (1-based): doubled each time, capped, then shortened
    /// by up to half with `random` in [0, 1).
    func delay(retry: Int, random: Double) -> TimeInterval {
        let base = initialDelay.timeInterval * pow(2, Double(max(0, retry - 1)))
        let capped = min(base, maximumDelay.timeInterval)
        return capped * (1 - 0.5 * min(max(random, 0), 1))
    }
}

/// A grant request to the token endpoint (without client authentication).
struct GrantRequest: Sendable {
    /// The form fields (grant_type first).
    var form: FormBody

    /// `grant_type=client_credentials` with scope, audience and resources.
    static func clientCredentials(_ configuration: OAuthClientConfiguration) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "client_credentials")
        addCommon(&form, configuration)
        return GrantRequest(form: form)
    }

    /// `grant_type=refresh_token` with the refresh token, scope, audience and resources.
    static func refresh(_ refreshToken: String, _ configuration: OAuthClientConfiguration) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "refresh_token")
        form.add("refresh_token", refreshToken)
        Redactor.shared.registerToken(refreshToken)
        addCommon(&form, configuration)
        return GrantRequest(form: form)
    }

    /// `grant_type=authorization_code` with the code, the same `redirect_uri` as the authorization
    /// request, and the PKCE verifier (RFC 6749 §4.1.3, RFC 7636 §4.5).
    static func authorizationCode(
        _ code: String, redirectURI: String, verifier: String, _ configuration: OAuthClientConfiguration
    ) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "authorization_code")
        form.add("code", code)
        Redactor.shared.register(code)
        form.add("redirect_uri", redirectURI)
        form.add("code_verifier", verifier)
        addResources(&form, configuration)
        addTokenParameters(&form, configuration)
        return GrantRequest(form: form)
    }

    /// The RFC 8628 §3.4 device access token request.
    static func deviceCode(_ deviceCode: String, _ configuration: OAuthClientConfiguration) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "urn:ietf:params:oauth:grant-type:device_code")
        form.add("device_code", deviceCode)
        Redactor.shared.register(deviceCode)
        addResources(&form, configuration)
        addTokenParameters(&form, configuration)
        return GrantRequest(form: form)
    }

    /// The profile's extra `token` parameters (interactive profiles).
    private static func addTokenParameters(_ form: inout FormBody, _ configuration: OAuthClientConfiguration) {
        for (name, value) in configuration.grant.interactive?.tokenParameters ?? [] { form.add(name, value) }
    }

    private static func addCommon(_ form: inout FormBody, _ configuration: OAuthClientConfiguration) {
        if !configuration.scopes.isEmpty { form.add("scope", configuration.scopes.joined(separator: " ")) }
        if let audience = configuration.audience { form.add("audience", audience) }
        addResources(&form, configuration)
        addTokenParameters(&form, configuration)
    }

    /// RFC 8707 §2.2: the resource indicators go on every token request, the code exchange too.
    private static func addResources(_ form: inout FormBody, _ configuration: OAuthClientConfiguration) {
        for resource in configuration.resources { form.add("resource", resource) }
    }
}

/// A DPoP token request answered with another token type (RFC 9449 §5: a downgrade), with what
/// the server issued, so that it can be revoked. Never printed: its description holds no token.
struct DPoPDowngrade: Error, CustomStringConvertible {
    let response: TokenResponse

    static let reason =
        "token_type is not DPoP although a DPoP proof was sent (a downgrade to a bearer token is refused)"
    var description: String { Self.reason }
}

/// What a DPoP session's token requests are signed with: its key, and the manager's nonces.
struct DPoPSigning: Sendable {
    let key: DPoPKey
    let nonces: DPoPNonces
}

/// Sends grant requests to a token endpoint through an ``HTTPTransport``: builds the form and
/// the client authentication, validates the answer, retries transient failures within a deadline.
public struct TokenEndpointClient: Sendable {
    /// The transport (follows no redirects).
    public let transport: any HTTPTransport
    /// The time source for deadlines and backoff.
    public let clock: any AuthClock
    /// Jitter source in [0, 1).
    public let random: @Sendable () -> Double
    /// The retry policy.
    public let retryPolicy: RetryPolicy

    /// Creates a client over `transport`.
    public init(
        transport: any HTTPTransport, clock: any AuthClock = SystemAuthClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        retryPolicy: RetryPolicy = RetryPolicy()
    ) {
        self.transport = transport
        self.clock = clock
        self.random = random
        self.retryPolicy = retryPolicy
    }

    /// The parsed URL of a request this client built (from a checked endpoint).
    private static func target(_ request: HTTPRequest) throws(AuthError) -> ParsedURL {
        do {
            return try request.targetURL()
        } catch {
            throw .configuration("token endpoint: \(error)")
        }
    }

    /// Builds the HTTP request for `grant` to `endpoint`, authenticating as the configured client.
    func makeRequest(
        endpoint: String, grant: GrantRequest, configuration: OAuthClientConfiguration, credential: ClientCredential?
    ) throws(AuthError) -> HTTPRequest {
        try Self.authenticatedPost(
            endpoint: endpoint, what: "token endpoint", form: grant.form, configuration: configuration,
            credential: credential, now: clock.now)
    }

    /// A form POST to `endpoint` (checked against ``EndpointPolicy``) carrying the configured
    /// client authentication (basic, post, a fresh `private_key_jwt` assertion, or none), as for the
    /// token endpoint.
    static func authenticatedPost(
        endpoint: String, what: String, form: FormBody, configuration: OAuthClientConfiguration,
        credential: ClientCredential?, now: Date
    ) throws(AuthError) -> HTTPRequest {
        var secret: String?
        if case .secret(let value) = credential { secret = value }
        // The URL sent is libcurl's normalised text of the one checked.
        let url = try EndpointPolicy.check(endpoint, what: what).text
        var form = form
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        switch configuration.clientAuth {
        case .clientSecretBasic:
            guard let secret else { throw .configuration("client_secret_basic needs a client_secret") }
            let value = FormBody.basicAuthorization(clientID: configuration.clientID, secret: secret)
            Redactor.shared.registerToken(String(value.dropFirst("Basic ".count)))
            headers.add(name: "Authorization", value: value)
        case .clientSecretPost:
            guard let secret else { throw .configuration("client_secret_post needs a client_secret") }
            form.add("client_id", configuration.clientID)
            form.add("client_secret", secret)
            Redactor.shared.registerToken(secret)
        case .none:
            // A jwt-bearer session may name no client (RFC 7523 §3.1): then no client_id at all.
            if !configuration.namesNoClient { form.add("client_id", configuration.clientID) }
        case .privateKeyJWT:
            guard case .key(let key, let algorithm, let keyID, let audience) = credential else {
                throw .configuration("private_key_jwt needs a client_key")
            }
            let assertion = try ClientCredential.assertion(
                clientID: configuration.clientID, key: key, algorithm: algorithm, keyID: keyID, audience: audience,
                now: now)
            form.add("client_id", configuration.clientID)
            form.add("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            form.add("client_assertion", assertion)
        case .tlsClientAuth, .selfSignedTLSClientAuth:
            // RFC 8705 §2: the certificate in the handshake authenticates; the body names the client.
            guard case .certificate = credential else {
                throw .configuration("client_auth \(configuration.clientAuth.rawValue) needs a client_cert")
            }
            form.add("client_id", configuration.clientID)
        }
        var request = HTTPRequest(method: "POST", url: url, headers: headers, body: form.bytes)
        if case .certificate(let identity) = credential { request.clientIdentity = identity }
        return request
    }

    /// Sends the request `build` makes until it succeeds, fails for good, or `deadline` would pass.
    /// Each attempt is built afresh (a `private_key_jwt` assertion and a DPoP proof are good for one
    /// request: their `jti` is never sent twice). With `dpop`, every attempt carries a proof, a
    /// `use_dpop_nonce` answer gets one immediate retry with the server's nonce, and an answer whose
    /// `token_type` is not `DPoP` is refused (a downgrade). `beforeFirstSend` runs once, just before
    /// the first attempt goes out; it may throw to abandon the request.
    func send(
        deadline: Date, dpop: DPoPSigning? = nil, beforeFirstSend: @Sendable () async throws -> Void,
        build: () throws(AuthError) -> HTTPRequest
    ) async throws -> TokenResponse {
        var attempt = 0
        var lastError: AuthError = .timeout
        var nonceRetried = false
        while true {
            guard let timeout = clock.requestTimeout(until: deadline) else {
                throw attempt == 0 ? AuthError.timeout : lastError
            }
            var attemptRequest = try build()
            attemptRequest.timeout = timeout
            let url: ParsedURL?
            if let dpop {
                let target = try Self.target(attemptRequest)
                url = target
                attemptRequest.headers.set(
                    name: "DPoP",
                    value: try dpop.key.proof(
                        method: attemptRequest.method, url: target, accessToken: nil,
                        nonce: dpop.nonces.nonce(for: target), now: clock.now))
            } else {
                url = nil
            }
            if attempt == 0 { try await beforeFirstSend() }
            attempt += 1
            var retryAfter: Duration?
            do {
                let response = try await AuthorizationServerCall.send(
                    attemptRequest, to: "token endpoint", over: transport)
                let newNonce = url.map { dpop?.nonces.remember(response.headers, from: $0) ?? false } ?? false
                switch TokenResponseParser.classify(response, dpop: dpop != nil) {
                case .success(let token):
                    if dpop != nil, token.tokenType.lowercased() != "dpop" { throw DPoPDowngrade(response: token) }
                    return token
                case .failure(let error, _, _) where error.oauthError == "use_dpop_nonce" && dpop != nil:
                    // RFC 9449 §8: the server did not act on the request; once, with its nonce.
                    guard newNonce, !nonceRetried else { throw error }
                    nonceRetried = true
                    log.debug("token endpoint asked for a DPoP nonce; sending again with it")
                    continue
                case .failure(let error, let transient, let after):
                    guard transient else { throw error }
                    lastError = error
                    retryAfter = after
                }
            } catch AuthError.endpoint(let endpoint, let cause) {
                lastError = AuthError.endpoint(endpoint, cause)
                guard cause.isRetryable else { throw lastError }
                if case .timeout = cause, clock.now >= deadline { throw AuthError.timeout }
            }
            guard attempt < retryPolicy.maximumAttempts else { throw lastError }
            let delay = retryAfter?.timeInterval ?? retryPolicy.delay(retry: attempt, random: random())
            let wake = clock.now.addingTimeInterval(delay)
            guard wake < deadline else { throw lastError }
            log.debug(
                "token endpoint attempt \(attempt) failed (\(lastError.errorKind.rawValue)); retrying in \(Int(delay * 1000)) ms"
            )
            try await clock.sleep(until: wake)
        }
    }
}
