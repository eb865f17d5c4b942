/// The auth-recovery budget of one subscription, shared by all of its reconnects (SPEC §5.5, §7 "Events"): one replay
/// with a renewed token after a `401` with `error="invalid_token"`, restored once a connection opens successfully.
/// So a long-lived subscription survives any number of token lifetimes, but two `401`s in a row with no successful
/// connection between them end it instead of looping. Pure; the event source owns one per subscription.
///
/// Usage: on `401 invalid_token` call ``consume()``; `true` means invalidate the token and reconnect once, `false`
/// means end the subscription with an auth error. On a successful open (a `2xx` event-stream response) call
/// ``connectionOpened()``.
public struct EventStreamAuthRecoveryBudget: Sendable, Hashable {
    /// Whether the one replay is available.
    public private(set) var isAvailable = true

    /// Creates a budget with its replay available.
    public init() {}

    /// Takes the replay for a `401 invalid_token`.
    /// - Returns: `true` if it was available (it is now spent): renew the credential and reconnect; `false` if it was
    ///   already spent since the last successful open: give up.
    public mutating func consume() -> Bool {
        guard isAvailable else { return false }
        isAvailable = false
        return true
    }

    /// A connection opened successfully with the current credential: the replay is available again.
    public mutating func connectionOpened() {
        isAvailable = true
    }
}
