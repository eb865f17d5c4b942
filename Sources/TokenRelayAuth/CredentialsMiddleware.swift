import TokenRelayHTTP
import TokenRelayLogging

/// Attaches credentials from a ``CredentialSource`` to requests for allowed origins, and recovers
/// once from an expired or revoked token (SPEC §5.3, §5.5): the one place that decides where
/// credentials go and when a 401 is replayed, for `request` and `subscribe` alike.
///
/// Recovery: when the response is `401` with a `Bearer` challenge whose `error` is
/// `invalid_token`, the source is renewable, the method is `GET`, `HEAD` or `OPTIONS`, the
/// request has no body and the ``AuthRecoveryBudget`` has its replay, the credential the request
/// was signed with is invalidated and the request is replayed with freshly applied credentials;
/// the second response is returned as it is. Nothing else is ever replayed (403, other methods,
/// bodies, other challenges), but a `401 invalid_token` that is not replayed (a POST, a body, the
/// budget spent) still invalidates the credential it was signed with, whatever the method, so the
/// next request renews rather than sending a revoked token again (SPEC §5.3). The request's
/// ``HTTPRequest/replayObserver`` is told of the replay.
public struct CredentialsMiddleware: HTTPMiddleware {
    /// Where credentials come from.
    public let source: any CredentialSource
    /// Where they may go.
    public let origins: OriginPolicy
    /// The budget shared by every request through this middleware (a subscription's connections);
    /// `nil`: each request gets a budget of its own (one replay).
    public let budget: AuthRecoveryBudget?

    public init(source: any CredentialSource, origins: OriginPolicy, budget: AuthRecoveryBudget? = nil) {
        self.source = source
        self.origins = origins
        self.budget = budget
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
        var signed = request
        var stamp = try await source.apply(to: &signed)
        var response = try await next(signed)
        if source.signsAgain(after: response.status, headers: response.headers, request: signed) {
            // A DPoP nonce challenge (RFC 9449 §9): the server did not act on the request; signed
            // again with its nonce and sent once more, whatever the method.
            response.cancel()
            Logger.shared.debug(
                "401 use_dpop_nonce: signing again with the server's nonce", [("method", request.method)])
            signed = request
            stamp = try await source.apply(to: &signed)
            response = try await next(signed)
            _ = source.signsAgain(after: response.status, headers: response.headers, request: signed)
        }
        guard source.isRenewable, Self.isInvalidToken(status: response.status, headers: response.headers) else {
            if (200..<300).contains(response.status) { budget.restore() }
            return response
        }
        guard Self.isReplayable(request), budget.consume() else {
            // Not replayed (an unsafe method, a body, or the budget spent), but the token was
            // refused all the same: it is invalidated (if it is still the session's current one), so
            // the next request renews instead of sending a revoked token again (SPEC §5.3). The
            // server's answer is the caller's; a failure to invalidate (renewals paused) is logged
            // and reported by the source, not put in its place.
            do {
                try await source.invalidate(stamp: stamp)
            } catch {
                Logger.shared.debug("401 invalid_token: the credential could not be invalidated: \(error)")
            }
            return response
        }
        response.cancel()
        Logger.shared.debug(
            "401 invalid_token: renewing the credential and replaying once", [("method", request.method)])
        request.replayObserver?(.answering(status: response.status))
        try await source.invalidate(stamp: stamp)
        request.replayObserver?(.replaying(status: response.status))
        var replay = request
        _ = try await source.apply(to: &replay)
        let second = try await next(replay)
        _ = source.signsAgain(after: second.status, headers: second.headers, request: replay)  // keeps its nonce
        if (200..<300).contains(second.status) { budget.restore() }
        return second
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
