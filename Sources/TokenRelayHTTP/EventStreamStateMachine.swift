import TokenRelayErrorKinds

/// The decisions of one event-stream subscription (SPEC §5.5, §7 "Events") as a pure state machine: the
/// ``EventSource`` feeds it what happened (a connection is due, a response head, a failure, events dispatched, the end
/// of a body) and does what it answers (announce state changes, connect, read the body, wait, finish). No clock, no
/// I/O, no randomness: the jitter of a backoff delay and the server's latest `retry` are inputs.
///
/// Rules, by what happened:
/// - a connection is due (the start, or a backoff wait is over): `connecting {attempt}`, connect.
/// - the pipeline replayed the connection after a `401` (the credentials middleware renewed the credential, see
///   ``HTTPRequest/replayObserver``): `reconnecting {attempt, retryInMs: 0, status, error: auth}` and
///   `connecting {attempt}` — an immediate reconnect, announced like every other.
/// - `200 text/event-stream`: `open`, read the body. `200` with another content type, other `2xx`, `3xx`, `4xx` other
///   than 408/429: `closed` (`protocol`, `http_status`); `204`: `closed {status: 204}` with no error; `401`:
///   `closed {status: 401, error: auth}`. `5xx`, `408`, `429` (`Retry-After` seconds as the minimum delay):
///   reconnect.
/// - a connection failure the transport calls final (an unusable URL or header, TLS): `closed` with its kind; a
///   middleware's error (a credential that cannot be had): `closed` with the kind it maps to; any other failure
///   (connect, drop, timeout, idle stall), a clean end of the body and a stream over the parser's bounds: reconnect.
/// - with ``untilClosed``, a clean end of the body: `closed` with no error (drops and errors still reconnect).
/// - reconnect: `reconnecting {attempt, retryInMs}` with the backoff of ``EventStreamReconnectPolicy`` (reset once a
///   connection delivered an event), then wait.
public struct EventStreamStateMachine: Sendable {
    /// How a connection or its body failed. The machine decides nothing about the error itself: its kind and message
    /// are what the pipeline's one error mapping says (``EventSourceConfiguration/describeFailure``, the same mapping a
    /// `request` answers with), and whether a new connection may cure it is the transport's own verdict
    /// (``HTTPError/isRetryable``).
    public enum Failure: Sendable, Hashable {
        /// The connection could not be made, or its body broke (DNS, TCP, TLS, a timeout, an idle stall, a request
        /// the transport refuses): reconnect when `retryable`, else close.
        case connection(EventSourceFailure, retryable: Bool)
        /// A middleware's error (a credential that cannot be had), with the kind it maps to and the status of a
        /// response it was answering, if any: final.
        case middleware(EventSourceFailure, status: Int?)
    }

    /// What to do after the announcements.
    public enum Next: Sendable, Hashable {
        /// Make a connection.
        case connect
        /// Read the body of the response at hand (any other next step drops that response).
        case readBody
        /// Wait this long, then tell the machine ``waited()``.
        case wait(milliseconds: Int)
        /// The subscription is over.
        case finish
    }

    /// The machine's answer: state changes to hand out, in order, then what to do.
    public struct Transition: Sendable, Hashable {
        public var announce: [SubscriptionStateChange]
        public var next: Next

        public init(announce: [SubscriptionStateChange], next: Next) {
            self.announce = announce
            self.next = next
        }
    }

    /// The backoff.
    public private(set) var policy: EventStreamReconnectPolicy
    /// Reconnects announced since the last connection that delivered an event (the announced `attempt`).
    public private(set) var reconnects = 0
    /// Whether the current connection delivered an event.
    public private(set) var delivered = false
    /// Whether `closed` was decided.
    public private(set) var isFinished = false
    /// Whether a clean end of the body ends the subscription (a finite stream) instead of reconnecting.
    public let untilClosed: Bool

    /// A subscription that has not connected yet; `untilClosed`: see ``untilClosed``.
    public init(policy: EventStreamReconnectPolicy, untilClosed: Bool = false) {
        self.policy = policy
        self.untilClosed = untilClosed
    }

    /// The subscription starts: its first connection.
    public mutating func start() -> Transition {
        Transition(announce: [SubscriptionStateChange(state: .connecting, attempt: reconnects)], next: .connect)
    }

    /// A backoff wait is over: connect again.
    public mutating func waited() -> Transition {
        Transition(announce: [SubscriptionStateChange(state: .connecting, attempt: reconnects)], next: .connect)
    }

    /// The pipeline answered a response of `status` by connecting again (a 401 recovery): the immediate reconnect's
    /// announcements; the replay's outcome follows.
    public mutating func replayed(status: Int) -> [SubscriptionStateChange] {
        reconnects += 1
        return [
            SubscriptionStateChange(
                state: .reconnecting, attempt: reconnects, retryInMs: 0, status: status,
                error: EventSourceFailure(kind: EventSourceFailure.auth, message: "the access token was rejected")),
            SubscriptionStateChange(state: .connecting, attempt: reconnects),
        ]
    }

    /// A response head arrived.
    /// - Parameters:
    ///   - contentType: its `Content-Type`; `retryAfter`: its `Retry-After`.
    ///   - serverRetry: the stream's latest `retry` (``ServerSentEventParser/retry``); `jitter`: in [0, 1).
    public mutating func responded(
        status: Int, contentType: String?, retryAfter: String?, serverRetry: Int?, jitter: Double
    ) -> Transition {
        if status == 200 {
            guard Self.isEventStream(contentType) else {
                return close(
                    status: status, kind: EventSourceFailure.protocol,
                    message: "the response is not an event stream (content type is not text/event-stream)")
            }
            delivered = false
            return Transition(announce: [SubscriptionStateChange(state: .open, status: status)], next: .readBody)
        }
        switch status {
        case 204:
            return close(status: status)
        case 401:
            // The credentials middleware replays what it can recover from; what reaches us is final.
            return close(status: status, kind: EventSourceFailure.auth, message: "the server refused the credentials")
        case 408, 429, 500...599:
            return reconnect(
                status: status, kind: EventSourceFailure.httpStatus, message: "the server answered \(status)",
                minimumDelay: Self.retryAfterMilliseconds(retryAfter) ?? 0, serverRetry: serverRetry, jitter: jitter)
        default:
            return close(status: status, kind: EventSourceFailure.httpStatus, message: "the server answered \(status)")
        }
    }

    /// A connection could not be made, or its body broke.
    public mutating func failed(_ failure: Failure, serverRetry: Int?, jitter: Double) -> Transition {
        switch failure {
        case .connection(let failure, retryable: true):
            reconnect(kind: failure.kind, message: failure.message, serverRetry: serverRetry, jitter: jitter)
        case .connection(let failure, retryable: false):
            close(kind: failure.kind, message: failure.message)
        case .middleware(let failure, let status):
            close(status: status, kind: failure.kind, message: failure.message)
        }
    }

    /// A chunk of the open body dispatched at least one event.
    public mutating func eventsDispatched() {
        delivered = true
    }

    /// The open body ended cleanly: `closed` without an error when ``untilClosed`` (the server says the stream is
    /// over); else reconnect without an error (servers do this to rebalance).
    public mutating func bodyEnded(serverRetry: Int?, jitter: Double) -> Transition {
        if untilClosed { return close() }
        return reconnect(kind: nil, message: "", serverRetry: serverRetry, jitter: jitter)
    }

    /// The open body broke the parser's bounds (a line or event too large): the rest of that stream cannot be
    /// trusted; a new connection resumes after the last dispatched event.
    public mutating func streamInvalid(message: String, serverRetry: Int?, jitter: Double) -> Transition {
        reconnect(kind: EventSourceFailure.protocol, message: message, serverRetry: serverRetry, jitter: jitter)
    }

    // MARK: Decisions

    mutating func close(status: Int? = nil, kind: ErrorKind? = nil, message: String = "") -> Transition {
        isFinished = true
        let failure = kind.map { EventSourceFailure(kind: $0, message: message) }
        return Transition(
            announce: [SubscriptionStateChange(state: .closed, status: status, error: failure)], next: .finish)
    }

    mutating func reconnect(
        status: Int? = nil, kind: ErrorKind?, message: String, minimumDelay: Int = 0, serverRetry: Int?, jitter: Double
    ) -> Transition {
        if delivered {
            policy.connectionDeliveredEvent()
            reconnects = 0
            delivered = false
        }
        if let serverRetry, serverRetry != policy.serverRetryMilliseconds {
            policy.serverRequestedRetry(milliseconds: serverRetry)
        }
        let attempt = policy.countAttempt()
        let delay = max(minimumDelay, policy.delayMilliseconds(forAttempt: attempt, jitter: jitter))
        reconnects += 1
        let failure = kind.map { EventSourceFailure(kind: $0, message: message) }
        return Transition(
            announce: [
                SubscriptionStateChange(
                    state: .reconnecting, attempt: reconnects, retryInMs: delay, status: status, error: failure)
            ],
            next: .wait(milliseconds: delay))
    }

    /// Whether a `Content-Type` value is `text/event-stream` (parameters ignored).
    static func isEventStream(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return String(mediaType.trimmingSpaces()).caseInsensitiveEquals("text/event-stream")
    }

    /// `Retry-After` in delta-seconds, as milliseconds (capped at one day); `nil` when absent or an HTTP date.
    static func retryAfterMilliseconds(_ value: String?) -> Int? {
        guard let value, let seconds = Int(value.trimmingSpaces()), seconds >= 0 else { return nil }
        return min(seconds, 86_400) * 1000
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> SubSequence {
        var start = startIndex
        var end = endIndex
        while start < end, self[start] == " " || self[start] == "\t" { start = index(after: start) }
        while end > start, self[index(before: end)] == " " || self[index(before: end)] == "\t" {
            end = index(before: end)
        }
        return self[start..<end]
    }
}
