import TokenRelayHTTP
import TokenRelayLogging

/// Acts on what a discovered profile's resource says about authorization in its answers (SPEC
/// §9.1, §9.2): a 401 naming other `resource_metadata` resolves the session again, and a 403
/// `insufficient_scope` steps the session up to the union of its scopes and the challenge's (the
/// next request asks for them: an interactive profile logs in again, a `client_credentials` one
/// with `step_up: true` acquires afresh). The answer itself is returned unchanged: a request is
/// never replayed here.
public struct ResourceChallengeMiddleware: HTTPMiddleware {
    /// The resolver of the profile.
    public let authorization: ResourceAuthorization
    /// The origins the profile's credentials go to: only their challenges count.
    public let origins: OriginPolicy

    public init(authorization: ResourceAuthorization, origins: OriginPolicy) {
        self.authorization = authorization
        self.origins = origins
    }

    public func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        let response = try await next(request)
        guard response.status == 401 || response.status == 403, origins.allows(request),
            let challenge = WWWAuthenticateChallenge.parse(headers: response.headers).first(where: {
                $0.isScheme("Bearer")
            })
        else { return response }
        let scopes = challenge.parameter("scope").map { $0.split(separator: " ").map(String.init) }
        do {
            if response.status == 401, let hint = challenge.parameter("resource_metadata") {
                _ = try await authorization.key(metadataHint: hint, challengeScopes: scopes)
            } else if response.status == 403, challenge.parameter("error") == "insufficient_scope" {
                _ = try await authorization.stepUp(scopes: scopes ?? [])
                log.info("the resource asks for more scope: the next request of the profile asks for the union")
            }
        } catch {
            log.info("the resource's challenge was not acted on: \(String(describing: error))")
        }
        return response
    }
}
