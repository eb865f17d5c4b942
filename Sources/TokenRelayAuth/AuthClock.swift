import FoundationEssentials

/// The time source of the Auth module, injected so that tests control time.
public protocol AuthClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
    /// Suspends until `deadline` (returns at once if it has passed). Throws `CancellationError`
    /// when the calling task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// The real clock: `Date()` and `Task.sleep`.
public struct SystemAuthClock: AuthClock {
    /// Creates the system clock.
    public init() {}

    /// The current wall-clock time.
    public var now: Date { Date() }

    /// Sleeps until `deadline`; throws `CancellationError` when cancelled.
    public func sleep(until deadline: Date) async throws {
        let interval = deadline.timeIntervalSince(Date())
        if interval > 0 { try await Task.sleep(for: .seconds(interval)) }
        try Task.checkCancellation()
    }
}

extension Duration {
    /// The duration in seconds as a `TimeInterval`.
    var timeInterval: TimeInterval {
        let parts = components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}

extension AuthClock {
    /// The time left until `deadline` as a request timeout (at least 1 ms), or `nil` once it has
    /// passed: every request of the Auth module is bounded by what is left of its caller's deadline.
    func requestTimeout(until deadline: Date) -> Duration? {
        let remaining = deadline.timeIntervalSince(now)
        return remaining > 0 ? .milliseconds(Int64(max(1, remaining * 1000))) : nil
    }
}
