import FoundationEssentials
import TokenRelayErrorKinds

/// A snapshot of one session for `status` (SPEC §7). Never contains a token.
public struct SessionStatus: Sendable, Equatable {
    /// The session's state.
    public enum State: String, Sendable {
        /// No token yet.
        case none
        /// A token that is not due for renewal.
        case valid
        /// A token that is due for renewal or was invalidated.
        case expired
        /// An acquisition or renewal is in progress.
        case renewing
        /// The last acquisition failed and no token is held.
        case failed
        /// The refresh token was refused; a new login or seed is needed.
        case interactionRequired = "interaction_required"
    }

    /// Per-session counters.
    public struct Counters: Sendable, Equatable {
        /// Acquisitions without a previous token (first ones and re-acquisitions after `invalid_grant`).
        public var acquisitions = 0
        /// Renewals of a held token (by refresh or re-acquisition).
        public var renewals = 0
        /// Invalidations by a 401 recovery that took effect.
        public var recoveries = 0
        /// Token requests from callers.
        public var requests = 0
    }

    /// The environment name.
    public let environment: String
    /// The profile name.
    public let profile: String
    /// The profile type (`client_credentials`, `refresh_token`).
    public let type: String
    /// The state.
    public let state: State
    /// The current token's expiry, if known.
    public let expiresAt: Date?
    /// Whether a refresh token is held.
    public let refreshable: Bool
    /// The last error's kind and (redacted) message.
    public let lastError: (kind: ErrorKind, message: String)?
    /// The counters.
    public let counters: Counters
    /// Who is logged in (interactive OpenID Connect sessions).
    public var identity: LoginIdentity? = nil
    /// Whether the held token was read from the store (obtained by an earlier or another process).
    public let fromStore: Bool

    /// Creates a snapshot.
    public init(
        environment: String, profile: String, type: String, state: State, expiresAt: Date?, refreshable: Bool,
        lastError: (kind: ErrorKind, message: String)?, counters: Counters, fromStore: Bool = false,
        identity: LoginIdentity? = nil
    ) {
        self.environment = environment
        self.profile = profile
        self.type = type
        self.state = state
        self.expiresAt = expiresAt
        self.refreshable = refreshable
        self.lastError = lastError
        self.counters = counters
        self.fromStore = fromStore
        self.identity = identity
    }

    /// Field-wise equality (the error tuple compared by kind and message).
    public static func == (lhs: SessionStatus, rhs: SessionStatus) -> Bool {
        lhs.environment == rhs.environment && lhs.profile == rhs.profile && lhs.type == rhs.type
            && lhs.state == rhs.state && lhs.expiresAt == rhs.expiresAt && lhs.refreshable == rhs.refreshable
            && lhs.lastError?.kind == rhs.lastError?.kind && lhs.lastError?.message == rhs.lastError?.message
            && lhs.counters == rhs.counters && lhs.fromStore == rhs.fromStore && lhs.identity == rhs.identity
    }
}
