import FoundationEssentials

/// The parameters of a `session-changed` notification (SPEC §13.1). Never contains a token.
public struct SessionChange: Sendable, Equatable {
    /// Why the session changed.
    public enum Reason: String, Sendable, CaseIterable {
        /// A token was acquired or renewed.
        case valid
        /// The session needs a person to log in (with the login's prompt when one is under way).
        case loginRequired = "login-required"
        /// A person logged in.
        case loggedIn = "logged-in"
        /// The session was logged out.
        case loggedOut = "logged-out"
        /// The access token was invalidated (`token-invalidate`, a 401 recovery).
        case invalidated
        /// A renewal was refused (the refresh token or the profile's grant).
        case refreshFailed = "refresh-failed"
        /// The access token reached its expiry without being renewed.
        case expired
    }

    /// The environment name.
    public let environment: String
    /// The profile name.
    public let profile: String
    /// The session's state after the change, as `status` shows it.
    public let state: SessionStatus.State
    /// Why it changed.
    public let reason: Reason
    /// The access token's expiry, when a token is held and its expiry is known.
    public let expiresAt: Date?
    /// The login under way (`login-required` only).
    public let login: LoginPrompt?

    /// A change.
    public init(
        environment: String, profile: String, state: SessionStatus.State, reason: Reason, expiresAt: Date?,
        login: LoginPrompt? = nil
    ) {
        self.environment = environment
        self.profile = profile
        self.state = state
        self.reason = reason
        self.expiresAt = expiresAt
        self.login = login
    }
}
