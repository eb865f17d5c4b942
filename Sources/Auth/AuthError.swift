import Logging

/// Why a credential could not be had. Every description is redacted and never contains a token,
/// a secret or a response body.
public enum AuthError: Error, Sendable, Equatable, CustomStringConvertible {
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
    /// The profile's settings cannot work (bad endpoint, unsupported client authentication...).
    case configuration(String)
    /// The discovery document could not be trusted or used.
    case discovery(String)
    /// The token store failed to load or commit tokens.
    case storage(String)
    /// The token store cannot be used as configured (its file, directory, schema or key).
    case store(String)

    /// The stable wire `kind` string (SPEC §4.4).
    public var kind: String {
        switch self {
        case .oauth, .invalidTokenResponse, .excessiveRenewals, .discovery: "auth"
        case .interactionRequired: "interaction_required"
        case .transport: "transport"
        case .timeout: "timeout"
        case .cancelled: "cancelled"
        case .configuration, .store: "config"
        case .storage: "internal"
        }
    }

    /// The OAuth `error` code the server sent (redacted, bounded), if any.
    public var oauthError: String? {
        if case .oauth(let error, _, _) = self { return error.value }
        return nil
    }

    /// The OAuth `error_description` the server sent (redacted, bounded), if any.
    public var oauthErrorDescription: String? {
        if case .oauth(_, let description?, _) = self { return description.value }
        return nil
    }

    /// Whether this is a refusal by the authorization server (as opposed to an outage or a local
    /// problem): these are the failures that make a renewal "refused" for `auth-failed`.
    public var isRefusal: Bool {
        switch self {
        case .oauth(let error, _, let status): error.value != "temporarily_unavailable" && status < 500
        case .interactionRequired, .excessiveRenewals: true
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
        case .configuration(let reason): text = "invalid OAuth configuration: \(reason)"
        case .discovery(let reason): text = "authorization server discovery failed: \(reason)"
        case .storage(let reason): text = "token store failed: \(reason)"
        case .store(let reason): text = "token store: \(reason)"
        }
        return Redactor.shared.redact(text)
    }
}
