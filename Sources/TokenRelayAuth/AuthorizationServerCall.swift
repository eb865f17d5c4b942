import FoundationEssentials
import TokenRelayHTTP

/// One request to an authorization server's endpoint (the token endpoint, discovery, device authorization,
/// revocation, the GitHub Actions token service of an assertion grant, registration, protected resource metadata,
/// the ID token's JWKS): every endpoint sends through here, so the same failure gives the same error everywhere.
///
/// A transport failure becomes ``AuthError/endpoint(_:_:)`` naming the endpoint (its kind follows the cause:
/// `transport`, `timeout`, `config`); the task's cancellation (libcurl's, or the caller's) is thrown as
/// `CancellationError`, never made into a kind by hand. Which statuses are worth another try is
/// ``isTransient(status:)``.
enum AuthorizationServerCall {
    /// Sends `request` (its timeout set by the caller) to the endpoint called `endpoint` in messages.
    static func send(_ request: HTTPRequest, to endpoint: String, over transport: any HTTPTransport) async throws
        -> HTTPResponse
    {
        do {
            return try await transport.send(collecting: request)
        } catch let error as HTTPError {
            if case .cancelled = error { throw CancellationError() }
            throw AuthError.endpoint(endpoint, error)
        }
    }

    /// What an answer other than the endpoint's success says: the OAuth error it carries (RFC 6749 §5.2, kind `auth`
    /// with its `oauthError`), else that the endpoint answered with this status (kind `auth`: no usable answer).
    static func refusal(_ response: HTTPResponse, from endpoint: String) -> AuthError {
        TokenResponseParser.parseError(response.body, status: response.status)
            ?? .invalidTokenResponse("the \(endpoint) answered HTTP \(response.status) without an OAuth error object")
    }

    /// Whether an answer of `status` says the server cannot answer now, and the same request may succeed later
    /// (RFC 6749 has no such list; SPEC §5: 408, 429 and 5xx).
    static func isTransient(status: Int) -> Bool {
        status == 408 || status == 429 || (500...599).contains(status)
    }
}
