/// When an event stream subscription reconnects: exponential backoff with jitter that honours the server's `retry`
/// (SPEC §5.5, §7 "Events"). Pure: no clock, no sleeping; the event source asks for a delay and waits it itself.
///
/// The rules, for the `n`th consecutive reconnection attempt (`n` ≥ 1):
/// - base = the server's latest `retry` (``serverRequestedRetry(milliseconds:)``), else ``defaultBaseMilliseconds``
///   (1 s); raised to at least ``minimumBaseMilliseconds`` so that `retry: 0` cannot make a reconnect loop spin.
/// - nominal delay = min(base × 2^(n−1), cap), where cap = max(``capMilliseconds``, base): the doubling stops at the
///   cap (30 s), but a server that asks for more than the cap is given what it asked for, without doubling.
/// - jitter may shorten the nominal delay by at most ``maximumJitterFraction`` (20 %), never lengthen it:
///   delay = nominal − ⌊nominal × 0.2 × u⌋ for a uniform u in [0, 1) drawn from the injected random source.
/// - ``connectionDeliveredEvent()`` resets the count: the next reconnect is attempt 1 again. A connection that opens
///   but delivers nothing before dropping does not reset it, so a server that accepts and hangs up backs off too.
///
/// With the defaults and no jitter the delays are 1, 2, 4, 8, 16, 30, 30, … seconds.
public struct EventStreamReconnectPolicy: Sendable, Hashable {
    /// The base delay when the server sent no `retry`: 1 s.
    public static let defaultBaseMilliseconds = 1_000
    /// The default cap on the doubled delay: 30 s.
    public static let defaultCapMilliseconds = 30_000
    /// The default floor on the base delay: 100 ms.
    public static let defaultMinimumBaseMilliseconds = 100
    /// The default largest share of a delay that jitter may remove: 20 %.
    public static let defaultMaximumJitterFraction = 0.2

    /// The cap on the doubled delay, in milliseconds.
    public let capMilliseconds: Int
    /// The floor on the base delay, in milliseconds.
    public let minimumBaseMilliseconds: Int
    /// The largest share of a delay that jitter may remove, in [0, 1].
    public let maximumJitterFraction: Double
    /// The server's latest `retry`, in milliseconds; `nil` until it sends one.
    public private(set) var serverRetryMilliseconds: Int?
    /// How many reconnection attempts have been scheduled since the last connection that delivered an event.
    public private(set) var attempt = 0

    /// Creates a policy with no attempt made yet.
    /// - Parameters:
    ///   - capMilliseconds: the cap on the doubled delay (at least 1).
    ///   - minimumBaseMilliseconds: the floor on the base delay (at least 0).
    ///   - maximumJitterFraction: the largest share of a delay jitter may remove, clamped to [0, 1]; 0 disables jitter.
    ///   - serverRetryMilliseconds: a `retry` already known (for example from an earlier stream).
    public init(
        capMilliseconds: Int = defaultCapMilliseconds,
        minimumBaseMilliseconds: Int = defaultMinimumBaseMilliseconds,
        maximumJitterFraction: Double = defaultMaximumJitterFraction,
        serverRetryMilliseconds: Int? = nil
    ) {
        self.capMilliseconds = max(1, capMilliseconds)
        self.minimumBaseMilliseconds = max(0, minimumBaseMilliseconds)
        self.maximumJitterFraction = maximumJitterFraction.isNaN ? 0 : min(1, max(0, maximumJitterFraction))
        self.serverRetryMilliseconds = serverRetryMilliseconds.map { max(0, $0) }
    }

    /// The base the delays double from, in milliseconds.
    public var baseMilliseconds: Int {
        max(minimumBaseMilliseconds, serverRetryMilliseconds ?? Self.defaultBaseMilliseconds)
    }

    /// Records the stream's `retry` field (``ServerSentEventParser/retry``): later delays double from it.
    public mutating func serverRequestedRetry(milliseconds: Int) {
        serverRetryMilliseconds = max(0, milliseconds)
    }

    /// A connection delivered an event: the next reconnect starts again from attempt 1 (the base delay).
    public mutating func connectionDeliveredEvent() {
        attempt = 0
    }

    /// Schedules the next reconnection attempt: counts it and returns its number (1 for the first) and its delay.
    /// - Parameter random: the source of jitter; tests inject a seeded or constant generator.
    public mutating func nextAttempt(
        using random: inout some RandomNumberGenerator
    ) -> (attempt: Int, delayMilliseconds: Int) {
        let attempt = countAttempt()
        let unit = Double.random(in: 0..<1, using: &random)
        return (attempt, delayMilliseconds(forAttempt: attempt, jitter: unit))
    }

    /// Counts the next reconnection attempt and returns its number (1 for the first); its delay is
    /// ``delayMilliseconds(forAttempt:jitter:)`` with jitter drawn by the caller.
    public mutating func countAttempt() -> Int {
        if attempt < Int.max { attempt += 1 }
        return attempt
    }

    /// The nominal delay of attempt `attempt` (≥ 1; smaller counts as 1), before jitter, in milliseconds.
    public func nominalDelayMilliseconds(forAttempt attempt: Int) -> Int {
        let base = baseMilliseconds
        let cap = max(capMilliseconds, base)
        var delay = base
        var doublings = max(1, attempt) - 1
        while doublings > 0, delay < cap {
            let (doubled, overflow) = delay.multipliedReportingOverflow(by: 2)
            delay = overflow ? cap : doubled
            doublings -= 1
        }
        return min(delay, cap)
    }

    /// The delay of attempt `attempt` with jitter `jitter` in [0, 1] (clamped): 0 gives the nominal delay, values
    /// towards 1 shorten it by up to ``maximumJitterFraction``.
    public func delayMilliseconds(forAttempt attempt: Int, jitter: Double) -> Int {
        let nominal = nominalDelayMilliseconds(forAttempt: attempt)
        let unit = jitter.isNaN ? 0 : min(1, max(0, jitter))
        let reduction = Int((Double(nominal) * maximumJitterFraction * unit).rounded(.down))
        return nominal - min(max(0, reduction), nominal)
    }
}
