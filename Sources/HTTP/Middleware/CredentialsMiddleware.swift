import Logging

/// Attaches credentials from a ``CredentialSource`` to requests for allowed origins, and recovers
/// once from an expired or revoked token (SPEC §5.3).
///
/// Recovery: when the response is `401` with a `Bearer` challenge whose `error` is
/// `invalid_token`, the source is renewable, the method is `GET`, `HEAD` or `OPTIONS` and the
/// request has no body, the credential the request was signed with is invalidated and the
/// request is replayed ONCE with freshly applied credentials; the second response is returned
/// as it is. Nothing else is ever replayed (403, other methods, bodies, other challenges).
public struct CredentialsMiddleware: HTTPMiddleware {
    /// Where credentials come from.
    public let source: any CredentialSource
    /// Where they may go.
    public let origins: OriginPolicy

    public init(source: any CredentialSource, origins: OriginPolicy) {
        self.source = source
        self.origins = origins
    }

    public func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        guard origins.allows(url: request.url) else {
            Logger.shared.debug(
                "credentials withheld: origin not allowed",
                [("origin", Origin(url: request.url)?.description ?? "unknown")])
            return try await next(request)
        }
        var signed = request
        let stamp = try await source.apply(to: &signed)
        let response = try await next(signed)
        guard Self.isRecoverable(request: request, response: response), source.isRenewable else { return response }
        Logger.shared.debug(
            "401 invalid_token: renewing the credential and replaying once", [("method", request.method)])
        try await source.invalidate(stamp: stamp)
        var replay = request
        _ = try await source.apply(to: &replay)
        return try await next(replay)
    }

    /// Methods that may be replayed after a renewal.
    static let replayableMethods: Set<String> = ["GET", "HEAD", "OPTIONS"]

    /// Whether `response` to `request` calls for one renewal and replay (the source aside).
    public static func isRecoverable(request: HTTPRequest, response: HTTPResponse) -> Bool {
        guard replayableMethods.contains(request.method), request.body?.isEmpty ?? true else { return false }
        return isInvalidToken(status: response.status, headers: response.headers)
    }

    /// Whether a response is `401` with a `Bearer` challenge carrying `error="invalid_token"`
    /// (also for streamed responses, whose event source runs its own recovery budget).
    public static func isInvalidToken(status: Int, headers: HTTPHeaders) -> Bool {
        guard status == 401 else { return false }
        return WWWAuthenticateChallenge.parse(headers: headers).contains { challenge in
            challenge.isScheme("Bearer") && challenge.parameter("error") == "invalid_token"
        }
    }
}
