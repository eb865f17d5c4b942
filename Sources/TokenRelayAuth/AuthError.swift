import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayLogging

/// Why a credential could not be had. Every description is redacted and never contains a token,
/// a secret or a response body.
public enum AuthError: KindedError, Sendable, Equatable, CustomStringConvertible {
    /// The token endpoint answered with an OAuth error object (RFC 6749 §5.2); its texts are
    /// cleaned where they are read (``ServerText``).
    case oauth(error: ServerText, description: ServerText?, status: Int)
    /// The token endpoint's answer was not a valid token response (SPEC §7 "Token responses").
    case invalidTokenResponse(String)
    /// The session needs a new interactive login or a new seed (its refresh token was refused).
    case interactionRequired(String)
    /// More than the allowed number of unexplained renewals happened in the window; renewals are
    /// stopped until the window passes or the session is explicitly invalidated.
    case excessiveRenewals
    /// The token endpoint or discovery document could not be reached (DNS, connect, TLS).
    case transport(String)
    /// The caller's (or the acquisition's) time bound ran out.
    case timeout
    /// The caller or the manager gave up.
    case cancelled
    /// A `logout` ended the session while this acquisition was under way (SPEC §7): nothing was
    /// committed. Wire kind `logged_out`, never `cancelled`.
    case loggedOut
    /// The manager is closing (the process shuts down): wire kind `shutting_down`.
    case shuttingDown
    /// The profile's settings cannot work (bad endpoint, unsupported client authentication...).
    case configuration(String)
    /// A configured secret (a client secret, seed, token, key or password) could not be resolved:
    /// where it is declared and why, never a value. Wire kind `config`.
    case secretUnavailable(String)
    /// The discovery document could not be trusted or used.
    case discovery(String)
    /// The token store failed to load or commit tokens (wire kind `store`).
    case storage(String)
    /// The token store cannot be used as configured (its file, directory, schema or key).
    case store(String)
    /// An interactive session has no usable token: a person must log in (`login`); non-interactive
    /// callers get this at once (wire kind `interaction_required`, `data.login: true`).
    /// `scopes`: what the next login asks for (a step-up's union included; `data.scopes` on the
    /// wire, SPEC §9.2), when known.
    case loginRequired(String, scopes: [String] = [])
    /// The authorization server refused the login in the redirect or while polling (RFC 6749
    /// §4.1.2.1, RFC 8628 §3.5), e.g. `access_denied`.
    case loginRefused(error: ServerText, description: ServerText?)
    /// Too many failed logins of the session in the window (SPEC §5.4); wire kind `limit`.
    case loginAttemptsExceeded
    /// The ID token failed validation (OpenID Connect Core §3.1.3.7); nothing was stored.
    case invalidIDToken(String)
    /// The authorization response's `iss` is not the expected issuer, or is missing where the
    /// server's metadata says it is sent (RFC 9207, SPEC §9.5): it may come from another server, so
    /// nothing it carries was used or is shown.
    case wrongIssuer(String)
    /// A request to one of the authorization server's (or an identity platform's) endpoints
    /// failed in transport: the transport's error, wrapped with the endpoint it came from. Its
    /// kind follows the cause: unreachable, TLS → `transport`; a timeout → `timeout`; a URL or
    /// request that cannot be sent → `config` (endpoints come from the configuration or verified
    /// metadata); an answer too large → `auth`; cancelled → `cancelled`.
    case endpoint(String, HTTPError)
    /// A resource server refused the token for lack of scope (HTTP 403 `insufficient_scope`, SPEC
    /// §9.2) and the session was not stepped up: `refusal` says why. `scope`: what the resource's
    /// challenge asked for, if it said. The token endpoint was not asked. Wire kind `limit` once
    /// the step-up limit is reached, else `auth`.
    case insufficientScope(StepUpRefusal, scope: ServerText?)
    /// A pasted redirect URL (`login-complete`, `login --paste`, SPEC §13.2) was refused: it is not
    /// the callback of the login in progress, or no login waits for one. The login goes on.
    case pastedURL(String)

    /// The stable wire kind (SPEC §4.4).
    public var errorKind: ErrorKind {
        switch self {
        case .oauth, .invalidTokenResponse, .excessiveRenewals, .discovery, .loginRefused, .invalidIDToken,
            .wrongIssuer:
            .auth
        case .interactionRequired, .loginRequired: .interactionRequired
        case .loginAttemptsExceeded: .limit
        case .pastedURL: .invalidParams
        case .insufficientScope(let refusal, _):
            if case .limitReached = refusal { .limit } else { .auth }
        case .transport: .transport
        case .timeout: .timeout
        case .cancelled: .cancelled
        case .loggedOut: .loggedOut
        case .shuttingDown: .shuttingDown
        case .configuration, .secretUnavailable, .store: .config
        case .storage: .store
        case .endpoint(_, let cause):
            switch cause {
            case .transport, .tls: .transport
            case .timeout: .timeout
            case .invalidURL, .invalidRequest: .config
            case .bodyTooLarge: .auth
            case .cancelled: .cancelled
            }
        }
    }

    /// The OAuth `error` code the server sent (redacted, bounded), if any.
    public var oauthError: String? {
        switch self {
        case .oauth(let error, _, _), .loginRefused(let error, _): error.value
        default: nil
        }
    }

    /// Whether a person can fix this by logging in (`data.login: true` on the wire).
    public var needsLogin: Bool {
        if case .loginRequired = self { return true }
        return false
    }

    /// The scopes the login a ``loginRequired(_:scopes:)`` asks for would request (empty: not known).
    public var loginScopes: [String] {
        if case .loginRequired(_, let scopes) = self { return scopes }
        return []
    }

    /// The OAuth `error_description` the server sent (redacted, bounded), if any.
    public var oauthErrorDescription: String? {
        switch self {
        case .oauth(_, let description?, _), .loginRefused(_, let description?): description.value
        default: nil
        }
    }

    /// Whether this is a refusal by the authorization server (as opposed to an outage or a local
    /// problem): these are the failures that make a renewal "refused" for `auth-failed`.
    public var isRefusal: Bool {
        switch self {
        case .oauth(let error, _, let status): error.value != "temporarily_unavailable" && status < 500
        case .interactionRequired, .excessiveRenewals, .loginRequired: true
        default: false
        }
    }

    /// A redacted, human-readable message (never a secret, token or body).
    public var description: String {
        let text: String
        switch self {
        case .oauth(let error, let description, let status):
            var message = "the token endpoint refused the request (HTTP \(status), \(error.value))"
            if let description { message += ": \(description.value)" }
            text = message
        case .invalidTokenResponse(let reason): text = "invalid token response: \(reason)"
        case .interactionRequired(let reason): text = "interaction required: \(reason)"
        case .excessiveRenewals:
            text = "too many token renewals not explained by expiry (more than 5 in 30 s); renewals are paused"
        case .transport(let reason): text = "token endpoint unreachable: \(reason)"
        case .timeout: text = "timed out waiting for a token"
        case .cancelled: text = "token acquisition cancelled"
        case .loggedOut: text = "the session was logged out while its token was being acquired"
        case .shuttingDown: text = "the token manager is shutting down"
        case .configuration(let reason): text = "invalid OAuth configuration: \(reason)"
        case .secretUnavailable(let reason): text = "secret unavailable: \(reason)"
        case .discovery(let reason): text = "authorization server discovery failed: \(reason)"
        case .storage(let reason): text = "token store failed: \(reason)"
        case .store(let reason): text = "token store: \(reason)"
        case .loginRequired(let reason, _): text = "interaction required: \(reason); log in with the login method"
        case .loginRefused(let error, let description):
            text =
                "the authorization server refused the login (\(error.value))"
                + (description.map { ": \($0.value)" } ?? "")
        case .loginAttemptsExceeded:
            text = "too many failed logins for this session (3 in 10 minutes); try again later"
        case .invalidIDToken(let reason): text = "the ID token is not valid: \(reason)"
        case .wrongIssuer(let reason):
            text = "the authorization response does not come from the expected issuer (RFC 9207): \(reason)"
        case .pastedURL(let reason): text = "the pasted URL was not used: \(reason)"
        case .insufficientScope(let refusal, let scope):
            let refused =
                "the resource server refused the token for lack of scope (HTTP 403 insufficient_scope"
                + (scope.map { ", asking for scope '\($0.value)')" } ?? ")")
            switch refusal {
            case .notEnabled:
                text =
                    refused
                    + "; this profile does not step up (a client_credentials profile does with step_up: true), so no new token was asked for"
            case .alreadyHeld:
                text = refused + ", though the token already has those scopes; no new token was asked for"
            case .limitReached(let count, let windowSeconds):
                text =
                    refused
                    + " after \(count) step-ups in the last \(windowSeconds / 60) minutes, the most tokenrelay makes per session; no new token was asked for, and the next step-up waits until the window has passed"
            }
        case .endpoint(let endpoint, let cause):
            switch cause {
            case .transport, .tls, .timeout: text = "the \(endpoint) could not be reached: \(cause.description)"
            case .invalidURL, .invalidRequest:
                text = "the request to the \(endpoint) cannot be sent: \(cause.description)"
            case .bodyTooLarge: text = "the \(endpoint)'s answer is too large"
            case .cancelled: text = "the request to the \(endpoint) was cancelled"
            }
        }
        return Redactor.shared.redact(text)
    }
}

/// Why a session was not stepped up after a resource's 403 `insufficient_scope` (SPEC §9.2).
public enum StepUpRefusal: Sendable, Hashable {
    /// The profile does not step up (a `client_credentials` profile without `step_up: true`).
    case notEnabled
    /// The session's token already has every scope the resource asked for.
    case alreadyHeld
    /// `count` step-ups of the session in the last `windowSeconds`: the limit.
    case limitReached(count: Int, windowSeconds: Int)
}
