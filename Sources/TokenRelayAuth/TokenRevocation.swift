import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

/// Tokens a `logout` asks the authorization server to revoke (RFC 7009), for one session.
struct TokenRevocation: Sendable {
    /// The session the tokens belonged to (for log lines; never a token).
    let key: SessionKey
    /// The session's configuration (issuer, client authentication).
    let configuration: OAuthClientConfiguration
    /// The refresh token, if the session held one (revoked first).
    var refreshToken: String?
    /// The access token, if the session held one.
    var accessToken: String?

    /// Whether there is anything to revoke.
    var isEmpty: Bool { refreshToken == nil && accessToken == nil }

    /// The tokens with their `token_type_hint`, refresh token first (revoking it usually revokes
    /// the access tokens issued with it as well).
    var hinted: [(token: String, hint: String)] {
        var tokens: [(String, String)] = []
        if let refreshToken { tokens.append((refreshToken, "refresh_token")) }
        if let accessToken { tokens.append((accessToken, "access_token")) }
        return tokens
    }
}

extension TokenEndpointClient {
    /// The bound of one session's revocation at `logout`, discovery included.
    static let revocationTimeout: TimeInterval = 5

    /// Builds an RFC 7009 revocation request: `token` and `token_type_hint` form-posted to
    /// `endpoint` (same endpoint policy and client authentication as the token endpoint).
    func makeRevocationRequest(
        endpoint: String, token: String, hint: String, configuration: OAuthClientConfiguration,
        credential: ClientCredential?
    ) throws(AuthError) -> HTTPRequest {
        var form = FormBody()
        form.add("token", token)
        Redactor.shared.registerToken(token)
        form.add("token_type_hint", hint)
        return try Self.authenticatedPost(
            endpoint: endpoint, what: "revocation endpoint", form: form, configuration: configuration,
            credential: credential, now: clock.now)
    }

    /// Sends one revocation request once, within `deadline`. RFC 7009 §2.2: HTTP 200 means the
    /// token is revoked (or was already invalid); anything else throws.
    func revoke(_ request: HTTPRequest, deadline: Date) async throws {
        guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
        var attemptRequest = request
        attemptRequest.timeout = timeout
        let response = try await AuthorizationServerCall.send(
            attemptRequest, to: "revocation endpoint", over: transport)
        guard response.status == 200 else {
            throw AuthorizationServerCall.refusal(response, from: "revocation endpoint")
        }
    }
}

extension TokenManager {
    /// Revokes each session's tokens at its authorization server, where discovery names a
    /// revocation endpoint; sessions are handled concurrently, each bounded by
    /// ``TokenEndpointClient/revocationTimeout``. Failures are logged (redacted), never thrown:
    /// the local logout has already happened.
    func revokeAtServers(_ revocations: [TokenRevocation]) async {
        await withTaskGroup(of: Void.self) { group in
            for revocation in revocations where !revocation.isEmpty {
                group.addTask { await self.revokeAtServer(revocation) }
            }
        }
    }

    private nonisolated func revokeAtServer(_ revocation: TokenRevocation) async {
        let configuration = revocation.configuration
        guard let issuer = configuration.issuer else { return }  // no metadata, no revocation endpoint
        let deadline = clock.now.addingTimeInterval(TokenEndpointClient.revocationTimeout)
        let traffic = traffic(for: revocation.key)
        let endpointClient = traffic.endpoint
        let endpoint: String
        let credential: ClientCredential?
        do {
            let metadata = try await traffic.discovery.metadata(for: issuer, deadline: deadline)
            guard
                let found = metadata.endpoint(
                    "revocation_endpoint", plain: metadata.revocationEndpoint,
                    mutualTLS: configuration.clientAuth.isMutualTLS)
            else { return }
            endpoint = found
            credential = try await ClientCredential.resolve(
                configuration, tokenEndpoint: configuration.tokenURL ?? metadata.tokenEndpoint)
        } catch {
            log.warn("tokens of \(revocation.key) were not revoked at the server: \(Self.describe(error))")
            return
        }
        for (token, hint) in revocation.hinted {
            do {
                let request = try endpointClient.makeRevocationRequest(
                    endpoint: endpoint, token: token, hint: hint, configuration: configuration,
                    credential: credential)
                try await endpointClient.revoke(request, deadline: deadline)
                log.debug("revoked the \(hint) of \(revocation.key) at the server")
            } catch {
                log.warn("the \(hint) of \(revocation.key) was not revoked at the server: \(Self.describe(error))")
            }
        }
    }

    /// A redacted description of a failure with its kind (an ``AuthError``'s own, or its type only).
    private nonisolated static func describe(_ error: any Error) -> String {
        if let error = error as? AuthError { return "\(error.description) (kind \(error.errorKind.rawValue))" }
        if error is CancellationError { return "cancelled (kind \(AuthError.cancelled.errorKind.rawValue))" }
        return "\(type(of: error))"
    }
}
