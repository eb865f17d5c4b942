import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// Where a `jwt_bearer` profile's assertion comes from (RFC 7523 §2.1, SPEC §10). Read again for
/// every acquisition: a projected service-account token or a JWT-SVID file is replaced by its
/// platform while the process runs.
public enum AssertionSource: Sendable {
    /// A secret source (file, env, command) holding the JWT.
    case secret(SecretProvider)
    /// The GitHub Actions OIDC token: `GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=...` with
    /// `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`, answering `{"value": JWT}`.
    case githubActions(audience: String?, requestURL: SecretProvider, requestToken: SecretProvider)
    /// `{ profile: P }`: P's current access token, renewed as it renews (SPEC §10), e.g. an ID-JAG
    /// from the person's IdP (SPEC §9.9). P's `audience` and `resource`, when it sets none, are
    /// this profile's authorization server and resource (known only after discovery), so P's
    /// session is keyed by them too.
    indirect case session(environment: String, profile: String, configuration: OAuthClientConfiguration)
}

extension TokenManager {
    /// The grant that obtains a token without a refresh token, for grants that can (client
    /// credentials, jwt-bearer, token exchange); `nil` for grants that cannot (a seed, a person).
    nonisolated func freshGrant(
        _ configuration: OAuthClientConfiguration, endpointClient: TokenEndpointClient, deadline: Date
    ) async throws -> GrantRequest? {
        switch configuration.grant {
        case .clientCredentials:
            return .clientCredentials(configuration)
        case .jwtBearer(.session):
            guard let key = try await assertionSession(configuration) else { return nil }
            // A refusal there is final: an IdP that will not issue the grant is not a reason to
            // ask the person to log in at this server (SPEC §9.9).
            let assertion = try await token(for: key, deadline: deadline).accessToken
            return .jwtBearer(assertion, configuration)
        case .jwtBearer(let source):
            let assertion = try await Self.assertion(source, endpointClient: endpointClient, deadline: deadline)
            return .jwtBearer(assertion, configuration)
        case .tokenExchange(let exchange):
            let subject = try await exchangeToken(exchange.subject, deadline: deadline)
            var actor: String?
            if let source = exchange.actor { actor = try await exchangeToken(source, deadline: deadline) }
            return .tokenExchange(exchange, subjectToken: subject, actorToken: actor, configuration)
        case .refreshToken, .interactive:
            return nil
        }
    }

    /// The session whose token is `configuration`'s assertion (`assertion: { profile }`), declared
    /// with the manager: that profile's configuration with, when it sets none, this profile's
    /// issuer as `audience` and its resources (both known only after discovery). `nil` for an
    /// assertion of another kind.
    nonisolated func assertionSession(_ configuration: OAuthClientConfiguration) async throws -> SessionKey? {
        guard case .jwtBearer(.session(let environment, let profile, var source)) = configuration.grant else {
            return nil
        }
        if source.audience == nil { source.audience = configuration.issuer }
        if source.resources.isEmpty { source.resources = configuration.resources }
        return try await register(environment: environment, profile: profile, configuration: source)
    }

    /// Whether `grant`, refused with `invalid_grant`, presented another session's token as its
    /// assertion (an ID-JAG expired or spent while that session still holds it, e.g. of unknown
    /// lifetime) that is now invalidated there: then the grant may be made and sent once more with
    /// a fresh one. Any other refusal is final.
    func invalidateRefusedAssertion(_ configuration: OAuthClientConfiguration, _ grant: GrantRequest) async throws
        -> Bool
    {
        guard let key = try await assertionSession(configuration),
            let assertion = grant.form.fields.first(where: { $0.name == "assertion" })?.value,
            try await invalidate(key, ifAccessToken: assertion)
        else { return false }
        log.info("the assertion from \(key) was refused; asking for a new one")
        return true
    }

    /// Reads the assertion now. A source that cannot be read is a `config` error; a GitHub Actions
    /// answer that is not a token is a `transport`/`auth` error.
    static func assertion(_ source: AssertionSource, endpointClient: TokenEndpointClient, deadline: Date) async throws
        -> String
    {
        switch source {
        case .secret(let provider):
            return try await provider.resolve("the assertion")
        case .session:
            throw AuthError.configuration("an assertion from a profile is that profile's token")
        case .githubActions(let audience, let requestURL, let requestToken):
            let base: String
            let token: String
            do {
                base = try await requestURL.resolve()
                token = try await requestToken.resolve()
            } catch {
                throw AuthError.configuration(
                    "assertion github_actions needs ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN "
                        + "(a job with permissions: id-token: write)")
            }
            var url = base
            if let audience {
                url += (base.contains("?") ? "&" : "?") + "audience=" + FormBody.encode(audience, spaceAsPlus: false)
            }
            return try await endpointClient.fetchGitHubActionsToken(url: url, bearer: token, deadline: deadline)
        }
    }
}

extension TokenEndpointClient {
    /// Asks the GitHub Actions runtime for an OIDC token (one attempt, no redirects); its value is
    /// registered with the redactor before it is returned.
    func fetchGitHubActionsToken(url: String, bearer: String, deadline: Date) async throws -> String {
        let checked = try EndpointPolicy.check(url, what: "ACTIONS_ID_TOKEN_REQUEST_URL").text
        guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        headers.add(name: "Authorization", value: "bearer " + bearer)
        var request = HTTPRequest(method: "GET", url: checked, headers: headers, body: nil)
        request.timeout = timeout
        let response = try await AuthorizationServerCall.send(
            request, to: "GitHub Actions OIDC token service", over: transport)
        guard response.status == 200 else {
            throw AuthorizationServerCall.refusal(response, from: "GitHub Actions OIDC token service")
        }
        guard response.body.count <= 64 << 10, let object = try? TokenResponseParser.jsonObject(response.body),
            let value = object["value"]?.stringValue, !value.isEmpty, value.utf8.count <= CompactJWS.maximumSize
        else {
            throw AuthError.invalidTokenResponse("the GitHub Actions OIDC answer has no token value")
        }
        Redactor.shared.registerToken(value)
        return value
    }
}

extension GrantRequest {
    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` with the assertion (RFC 7523 §2.1),
    /// scope, audience and resources.
    static func jwtBearer(_ assertion: String, _ configuration: OAuthClientConfiguration) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
        form.add("assertion", assertion)
        Redactor.shared.registerToken(assertion)
        if !configuration.scopes.isEmpty { form.add("scope", configuration.scopes.joined(separator: " ")) }
        if let audience = configuration.audience { form.add("audience", audience) }
        for resource in configuration.resources { form.add("resource", resource) }
        return GrantRequest(form: form)
    }
}
