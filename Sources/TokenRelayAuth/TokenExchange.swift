import FoundationEssentials
import TokenRelayLogging

/// A token exchange (RFC 8693 §2.1): which token is traded, for what.
public struct TokenExchange: Sendable {
    /// A token presented in the exchange.
    public enum Source: Sendable {
        /// Another profile's current access token (renewed as that session renews).
        case session(SessionKey)
        /// The ID token of another profile's login (OpenID Connect; SPEC §9.9), renewed as that
        /// session renews.
        case sessionIDToken(SessionKey)
        /// A token from a secret source, read for every exchange.
        case secret(SecretProvider, description: String)
    }

    /// `subject_token`.
    public var subject: Source
    /// `subject_token_type`.
    public var subjectTokenType: String
    /// `requested_token_type`, if any.
    public var requestedTokenType: String?
    /// `actor_token`, if any.
    public var actor: Source?
    /// `actor_token_type`.
    public var actorTokenType: String

    /// The RFC 8693 §3 URI of an access token.
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    /// Creates an exchange.
    public init(
        subject: Source, subjectTokenType: String = accessTokenType, requestedTokenType: String? = nil,
        actor: Source? = nil, actorTokenType: String = accessTokenType
    ) {
        self.subject = subject
        self.subjectTokenType = subjectTokenType
        self.requestedTokenType = requestedTokenType
        self.actor = actor
        self.actorTokenType = actorTokenType
    }

    /// Every setting that changes the issued token, as one text (no secret: a secret source is
    /// named by where it is declared).
    var variant: String {
        func describe(_ source: Source?) -> String {
            switch source {
            case .session(let key): "session(" + key.identity + ")"
            case .sessionIDToken(let key): "id_token(" + key.identity + ")"
            case .secret(_, let description): "secret(" + description + ")"
            case nil: "-"
            }
        }
        return [
            "subject=" + describe(subject), "subject_type=" + subjectTokenType,
            "requested=" + (requestedTokenType ?? "-"), "actor=" + describe(actor), "actor_type=" + actorTokenType,
        ].joined(separator: ";")
    }
}

extension TokenManager {
    /// The token `source` stands for now: the session's current access token (acquired or
    /// renewed as needed, within `deadline`), or the secret read again.
    func exchangeToken(_ source: TokenExchange.Source, deadline: Date) async throws -> String {
        switch source {
        case .session(let key):
            return try await token(for: key, deadline: deadline).accessToken
        case .sessionIDToken(let key):
            _ = try await token(for: key, deadline: deadline)
            guard let idToken = sessions[key]?.idToken else {
                throw AuthError.interactionRequired(
                    "the ID token of profile '\(key.profile)' is kept only from a login or renewal in this process: "
                        + "log in to it again")
            }
            return idToken
        case .secret(let provider, _):
            return try await provider.resolve("the token to exchange")
        }
    }
}

extension GrantRequest {
    /// `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693 §2.1) with the
    /// subject (and actor) token, their types, the requested type, scope, audience and resources.
    static func tokenExchange(
        _ exchange: TokenExchange, subjectToken: String, actorToken: String?, _ configuration: OAuthClientConfiguration
    ) -> GrantRequest {
        var form = FormBody()
        form.add("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
        form.add("subject_token", subjectToken)
        form.add("subject_token_type", exchange.subjectTokenType)
        var tokens = [subjectToken, FormBody.encode(subjectToken)]
        if let actorToken {
            form.add("actor_token", actorToken)
            form.add("actor_token_type", exchange.actorTokenType)
            tokens += [actorToken, FormBody.encode(actorToken)]
        }
        Redactor.shared.registerTokens(tokens)
        if let requested = exchange.requestedTokenType { form.add("requested_token_type", requested) }
        if !configuration.scopes.isEmpty { form.add("scope", configuration.scopes.joined(separator: " ")) }
        if let audience = configuration.audience { form.add("audience", audience) }
        for resource in configuration.resources { form.add("resource", resource) }
        return GrantRequest(form: form)
    }
}
