import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayLogging

/// Attaches credentials from a ``CredentialSource`` to requests for allowed origins, and recovers
/// from what the resource says about them (SPEC §5.3, §5.5, §9.1, §9.2, §9.6, §10 DPoP): the one
/// place that decides where credentials go and when a request goes again, for `request`,
/// `subscribe` and `mcp-proxy` alike. What it does after each answer is ``CredentialRecovery``'s
/// decision (pure); this type only performs it: sign again with a DPoP nonce, invalidate and
/// replay, invalidate and return, resolve a discovered session again, step up, log in.
///
/// Under the ``CredentialRecovery/Policy/request`` policy a `401 invalid_token` replays only a
/// bodyless `GET`, `HEAD` or `OPTIONS` while the ``AuthRecoveryBudget`` has its replay (any other
/// request still invalidates the token it was signed with, so the next request renews); under the
/// forwarding policy (``Forwarding``) any method goes again once, and a login or step-up starts.
/// The request's ``HTTPRequest/replayObserver`` is told of a replay.
public struct CredentialsMiddleware: HTTPMiddleware {
    /// The forwarding policy's powers (`mcp-proxy`, SPEC §9.6): what it may start that `request`
    /// only reports.
    public struct Forwarding: Sendable {
        /// Logs the person in to the source's session (joining a login in progress).
        public let logIn: @Sendable () async throws -> Void

        public init(logIn: @escaping @Sendable () async throws -> Void) {
            self.logIn = logIn
        }
    }

    /// Where credentials come from.
    public let source: any CredentialSource
    /// Where they may go.
    public let origins: OriginPolicy
    /// The budget shared by every request through this middleware (a subscription's connections);
    /// `nil`: each request gets a budget of its own (one replay).
    public let budget: AuthRecoveryBudget?
    /// The resolver of a discovered profile (`discover: true`): its challenges resolve the session
    /// again or step it up (SPEC §9.1, §9.2).
    public let discovery: ResourceAuthorization?
    /// `nil`: the `request` policy.
    public let forwarding: Forwarding?

    public init(
        source: any CredentialSource, origins: OriginPolicy, budget: AuthRecoveryBudget? = nil,
        discovery: ResourceAuthorization? = nil, forwarding: Forwarding? = nil
    ) {
        self.source = source
        self.origins = origins
        self.budget = budget
        self.discovery = discovery
        self.forwarding = forwarding
    }

    public func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        guard origins.allows(request) else {
            // At info, so `call -v` (and any serve log) says why a request went out without
            // credentials: a `url` to `localhost` when base_url says `127.0.0.1` otherwise only
            // comes back 401.
            Logger.shared.info("credentials not attached: \(origins.refusal(for: request))")
            return try await next(request)
        }
        let budget = self.budget ?? AuthRecoveryBudget()
        let recovery = CredentialRecovery(
            policy: forwarding == nil ? .request : .forwarding, replayable: Self.isReplayable(request),
            renewable: source.isRenewable, discovered: discovery != nil)
        var progress = CredentialRecovery.Progress()
        // SPEC §9.1: a discovered profile without a session yet sends without a credential first.
        var credentialed = await !source.awaitsChallenge
        while true {
            var signed = request
            let stamp: CredentialStamp? = credentialed ? try await apply(to: &signed, recovery, &progress) : nil
            let response = try await next(signed)
            let answer = CredentialRecovery.Answer(
                status: response.status, headers: response.headers, credentialed: credentialed,
                nonceChallenge: credentialed
                    && source.signsAgain(after: response.status, headers: response.headers, request: signed))
            var decision = recovery.after(answer, progress: progress, budgetAvailable: budget.isAvailable)
            // A body sent as it was produced cannot go again: the answer is the caller's (a
            // refused token is still invalidated, so the next request renews).
            if request.bodyStream != nil {
                switch decision {
                case .invalidateAndReplay: decision = .invalidateAndReturn
                case .signAgain, .resolveAgain, .stepUp: decision = .returnAnswer
                case .returnAnswer, .invalidateAndReturn: break
                }
            }
            switch decision {
            case .returnAnswer:
                if credentialed && (200..<300).contains(response.status) { budget.restore() }
                return response
            case .signAgain:
                // RFC 9449 §9: the server did not act on the request; any method goes once more.
                response.cancel()
                Logger.shared.debug(
                    "401 use_dpop_nonce: signing again with the server's nonce", [("method", request.method)])
                progress.signedAgain = true
            case .invalidateAndReplay:
                guard let stamp, budget.consume() else {
                    await invalidateQuietly(stamp)
                    return response
                }
                response.cancel()
                Logger.shared.debug(
                    "401 invalid_token: renewing the credential and replaying once", [("method", request.method)])
                request.replayObserver?(.answering(status: response.status))
                try await source.invalidate(stamp: stamp)
                request.replayObserver?(.replaying(status: response.status))
                progress.replayed = true
            case .invalidateAndReturn:
                await invalidateQuietly(stamp)
                return response
            case .resolveAgain(let hint, let scopes, let invalidate, let replay):
                if invalidate { await invalidateQuietly(stamp) }
                guard replay else {
                    await followQuietly { _ = try await discovery?.key(metadataHint: hint, challengeScopes: scopes) }
                    return response
                }
                if credentialed && !budget.consume() { return response }
                response.cancel()
                let key = try await discovery?.key(metadataHint: hint, challengeScopes: scopes)
                if let key, let missing = recovery.missingScopes(challenged: scopes, held: key.scopes) {
                    _ = try await discovery?.stepUp(scopes: missing)
                }
                if credentialed {
                    request.replayObserver?(.replaying(status: response.status))
                    progress.replayed = true
                }
                credentialed = true
            case .stepUp(let scopes, let replay):
                guard replay else {
                    await followQuietly {
                        _ = try await discovery?.stepUp(scopes: scopes)
                        Logger.shared.info(
                            "the resource asks for more scope: the next request of the profile asks for the union")
                    }
                    return response
                }
                response.cancel()
                _ = try await discovery?.stepUp(scopes: scopes)
                progress.steppedUp = true
            }
        }
    }

    /// Applies the source's credential; under the forwarding policy a session that needs a person
    /// logs in, and a refused registration is made again, before the credential is asked for again.
    private func apply(
        to request: inout HTTPRequest, _ recovery: CredentialRecovery, _ progress: inout CredentialRecovery.Progress
    ) async throws -> CredentialStamp {
        while true {
            do {
                return try await source.apply(to: &request)
            } catch {
                let kind = (error as? any KindedError)?.errorKind
                let refusal = recovery.afterRefusal(
                    interactionRequired: kind == .interactionRequired,
                    invalidClient: (error as? AuthError)?.oauthError == "invalid_client", progress: progress)
                switch refusal {
                case .fail: throw error
                case .logIn:
                    progress.loggedIn = true
                    try await forwarding?.logIn()
                case .applyAgain:
                    // The source dropped the refused registration: the next credential registers anew.
                    Logger.shared.info("the client registration was refused; registering again")
                    progress.registeredAgain = true
                }
            }
        }
    }

    /// Invalidates the refused credential; the answer stays the caller's, so a failure to invalidate
    /// (renewals paused) is logged and reported by the source, not put in its place.
    private func invalidateQuietly(_ stamp: CredentialStamp?) async {
        guard let stamp else { return }
        do {
            try await source.invalidate(stamp: stamp)
        } catch {
            Logger.shared.debug("401 invalid_token: the credential could not be invalidated: \(error)")
        }
    }

    /// Acts on a challenge whose answer is the caller's anyway: a failure is logged, not thrown.
    private func followQuietly(_ action: () async throws -> Void) async {
        do {
            try await action()
        } catch {
            Logger.shared.info("the resource's challenge was not acted on: \(String(describing: error))")
        }
    }

    /// Methods that may be replayed after a renewal.
    static let replayableMethods: Set<String> = ["GET", "HEAD", "OPTIONS"]

    /// Whether a response of `status` with `headers` to `request` calls for one renewal and
    /// replay (the source and the budget aside).
    public static func isRecoverable(request: HTTPRequest, status: Int, headers: HTTPHeaders) -> Bool {
        isReplayable(request) && isInvalidToken(status: status, headers: headers)
    }

    /// Whether `request` may be sent again: a bodyless `GET`, `HEAD` or `OPTIONS`.
    static func isReplayable(_ request: HTTPRequest) -> Bool {
        replayableMethods.contains(request.method) && (request.body?.isEmpty ?? true)
    }

    /// Whether `response` to `request` calls for one renewal and replay (the source aside).
    public static func isRecoverable(request: HTTPRequest, response: HTTPResponse) -> Bool {
        isRecoverable(request: request, status: response.status, headers: response.headers)
    }

    /// Whether a response is `401` with a `Bearer` (or, for a DPoP-bound token, `DPoP`) challenge
    /// carrying `error="invalid_token"`.
    public static func isInvalidToken(status: Int, headers: HTTPHeaders) -> Bool {
        WWWAuthenticateChallenge.isUnauthorized(
            status: status, headers: headers, schemes: ["Bearer", "DPoP"], error: "invalid_token")
    }
}
