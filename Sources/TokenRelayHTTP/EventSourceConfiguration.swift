/// The settings of one ``EventSource`` subscription.
public struct EventSourceConfiguration: Sendable {
    /// The default idle bound: no byte (not even a comment) for 45 s counts as a dropped connection.
    public static let defaultIdleTimeout: Duration = .seconds(45)
    /// The default cap on the reconnect delay: 30 s.
    public static let defaultMaxBackoff: Duration = .seconds(30)

    /// The request every connection starts from: its URL and the caller's already-merged headers. The method is always
    /// `GET` and the body is dropped; `Accept`, `Cache-Control` and `Last-Event-ID` are set per connection; the total
    /// `timeout` is ignored (streams have none).
    public var request: HTTPRequest
    /// The last event ID to resume from (sent as `Last-Event-ID` on the first connection). `nil` or empty: none.
    public var lastEventID: String?
    /// A clean end of a stream ends the subscription (`closed`, no error) instead of reconnecting; drops and errors
    /// still reconnect. For a finite stream (SPEC §5.5 `untilClosed`).
    public var untilClosed: Bool
    /// The `{kind, message}` a subscription closes with when the pipeline throws an error that is not the
    /// connection's (a middleware's: a credential that cannot be had). The relay passes its one error mapping; the
    /// default takes a ``KindedError``'s kind, else `auth`, and the redacted description.
    public var describeFailure: @Sendable (any Error) -> EventSourceFailure
    /// No byte for this long while we are not pausing the transfer: the connection is treated as dropped. `nil`: the
    /// transport's default.
    public var idleTimeout: Duration?
    /// The cap on the doubled reconnect delay (a server `retry` above it is still honoured).
    public var maxBackoff: Duration
    /// Bounds connection setup; `nil`: the transport's default.
    public var connectTimeout: Duration?
    /// The longest event-stream line accepted, in bytes; a longer one breaks the connection.
    public var maxLineLength: Int
    /// The largest event data accepted, in bytes; a larger one breaks the connection.
    public var maxEventSize: Int
    /// Draws the jitter of each backoff delay: a uniform value in [0, 1); 0 means no shortening. Tests inject a
    /// constant.
    public var jitter: @Sendable () -> Double
    /// Waits out a backoff delay; throws when cancelled. Tests inject one that records delays and returns at once.
    public var sleep: @Sendable (Duration) async throws -> Void

    /// Creates a configuration.
    public init(
        request: HTTPRequest,
        lastEventID: String? = nil,
        untilClosed: Bool = false,
        describeFailure: @escaping @Sendable (any Error) -> EventSourceFailure = EventSourceFailure.describing,
        idleTimeout: Duration? = defaultIdleTimeout,
        maxBackoff: Duration = defaultMaxBackoff,
        connectTimeout: Duration? = nil,
        maxLineLength: Int = ServerSentEventParser.defaultMaxLineLength,
        maxEventSize: Int = ServerSentEventParser.defaultMaxEventSize,
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.request = request
        self.lastEventID = lastEventID
        self.untilClosed = untilClosed
        self.describeFailure = describeFailure
        self.idleTimeout = idleTimeout
        self.maxBackoff = maxBackoff
        self.connectTimeout = connectTimeout
        self.maxLineLength = maxLineLength
        self.maxEventSize = maxEventSize
        self.jitter = jitter
        self.sleep = sleep
    }

    /// ``maxBackoff`` in whole milliseconds (at least 1).
    var maxBackoffMilliseconds: Int { max(1, Self.milliseconds(maxBackoff)) }

    /// A duration in whole milliseconds, saturating.
    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? 0 : Int(Int32.max) }
        return max(0, Int(clamping: ms + attoseconds / 1_000_000_000_000_000))
    }
}
