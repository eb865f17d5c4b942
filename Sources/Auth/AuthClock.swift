import Foundation

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
