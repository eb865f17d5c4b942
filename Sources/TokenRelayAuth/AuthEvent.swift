import FoundationEssentials
import TokenRelayErrorKinds

/// Something the Relay turns into a notification.
public enum AuthEvent: Sendable, Equatable {
    /// A renewal was refused (SPEC §7 `auth-failed`): the refresh grant or re-acquisition was
    /// rejected, or renewals were paused as excessive. Never sent for a failed first acquisition.
    case authFailed(AuthFailure)
    /// A login needs the person (SPEC §5.4 `auth-prompt`): one per login, however many callers joined.
    case prompt(LoginPrompt)
    /// A session changed (SPEC §13.1 `session-changed`), here or in another process sharing the
    /// store: only while someone watches (``TokenManager/watchSessions()``).
    case sessionChanged(SessionChange)
}

/// The parameters of an `auth-failed` notification.
public struct AuthFailure: Sendable, Equatable {
    /// The environment name.
    public let environment: String
    /// The profile name.
    public let profile: String
    /// The error's wire kind (`auth`, `interaction_required`).
    public let kind: ErrorKind
    /// The redacted error message.
    public let message: String
    /// The OAuth error code, when the server sent one.
    public let oauthError: String?
    /// The OAuth error description, when the server sent one.
    public let oauthErrorDescription: String?

    /// The failure of `key`, described by `error`.
    init(key: SessionKey, error: AuthError) {
        environment = key.environment
        profile = key.profile
        kind = error.errorKind
        message = error.description
        oauthError = error.oauthError
        oauthErrorDescription = error.oauthErrorDescription
    }
}
