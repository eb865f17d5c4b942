import Synchronization

/// The one auth recovery (renew the credential and replay after `401 invalid_token`) that
/// ``CredentialsMiddleware`` may spend (SPEC §5.3, §5.5, §7 "Events").
///
/// A `request` gets a budget of its own: one replay. A subscription passes ONE budget to every
/// connection it makes, so its reconnects share it: spent by a replay, restored once a
/// connection opens successfully (a `2xx` answer to a signed request). A long-lived subscription
/// thus survives many token lifetimes, but a server that keeps answering 401 is not retried in
/// a loop.
public final class AuthRecoveryBudget: Sendable {
    /// Guarded by the mutex: whether the one replay is available.
    private let available = Mutex(true)

    /// Creates a budget with its replay available.
    public init() {}

    /// Whether the replay is available.
    public var isAvailable: Bool { available.withLock { $0 } }

    /// Takes the replay: `true` if it was available (it is now spent), `false` if it was already
    /// spent since the last successful open.
    public func consume() -> Bool {
        available.withLock { available in
            defer { available = false }
            return available
        }
    }

    /// A connection opened successfully with the current credential: the replay is available again.
    public func restore() {
        available.withLock { $0 = true }
    }
}
