import ErrorKinds
import Logging

/// A Server-Sent-Events subscription (SPEC §5.5, §7 "Events") as a pull-based sequence of ``EventSourceUpdate``s:
/// state changes and events, across dropped connections and expiring tokens, ending after `closed`.
///
/// Pull-based: nothing is read from the network until the consumer asks for the next update, and the only buffer is
/// the events of the chunk being handed out. A slow consumer leaves the transport's bounded buffer full, the transfer
/// is paused, and memory stays bounded with nothing dropped. There is no task of its own: the consumer's task does
/// all the work, so cancelling it (or dropping the iterator) cancels the transfer, the credential wait or the backoff
/// sleep in flight, and the sequence ends quietly (no `closed`: the caller announces its own).
///
/// Each connection sends `GET` with `Accept: text/event-stream`, `Cache-Control: no-cache`, `Last-Event-ID` (the last
/// event ID in effect, when there is one) and fresh credentials. Outcomes:
/// - `200 text/event-stream`: `open`, then the events; the auth-recovery budget is restored.
/// - `200` with another content type, other `2xx`, `3xx`, `4xx` other than 401/408/429: `closed` (`protocol`,
///   `http_status`). `204`: `closed {status: 204}` with no error, never reconnected.
/// - `401` with a Bearer `error="invalid_token"` challenge, renewable credentials and the budget available: the budget
///   is spent, the credential invalidated, `reconnecting {retryInMs: 0}` and an immediate reconnect. Any other `401`:
///   `closed {status: 401, error: auth}`.
/// - `5xx`, `408`, `429` (`Retry-After` seconds as the minimum delay), connect and transport errors, drops, idle
///   stalls, a clean end of the body, and a line or event over the parser's bounds (kind `protocol`: the rest of that
///   connection's stream cannot be trusted, a new connection resumes after the last dispatched event): `reconnecting`
///   with the backoff of ``EventStreamReconnectPolicy``, then `connecting`.
/// - a credential error: `closed` with the error's ``KindedError/errorKind``, else `auth`.
/// - an error no reconnect can cure: `closed` with its kind — an unusable URL or header
///   (`invalid_params`), a TLS certificate or handshake failure (`transport`).
public struct EventSource: AsyncSequence, Sendable {
    public typealias Element = EventSourceUpdate
    public typealias Failure = Never

    /// The transport connections are made with.
    public let transport: any HTTPStreamingTransport
    /// The subscription's settings.
    public let configuration: EventSourceConfiguration

    /// Creates a subscription; nothing happens until it is iterated. Each iteration is an independent subscription.
    public init(transport: any HTTPStreamingTransport, configuration: EventSourceConfiguration) {
        self.transport = transport
        self.configuration = configuration
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(transport: transport, configuration: configuration)
    }

    /// Drives one subscription. Single consumer; not `Sendable`.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = EventSourceUpdate
        public typealias Failure = Never

        /// Where the subscription is.
        enum Phase {
            /// Make connection number `attempt` next (after announcing `connecting`).
            case connect(attempt: Int)
            /// `connecting` was announced: connect now.
            case connecting(attempt: Int)
            /// Reading the body of an open connection.
            case streaming(HTTPByteStream.AsyncIterator)
            /// `reconnecting` was announced: wait, then connect.
            case waiting(attempt: Int, delayMilliseconds: Int)
            /// The body iterator is on loan to ``read(_:)``.
            case reading
            /// Done: `closed` was handed out or the consumer was cancelled.
            case finished
        }

        let transport: any HTTPStreamingTransport
        let configuration: EventSourceConfiguration
        var phase: Phase = .connect(attempt: 0)
        var parser: ServerSentEventParser
        var policy: EventStreamReconnectPolicy
        var budget = EventStreamAuthRecoveryBudget()
        /// Reconnects announced since the last connection that delivered an event (the announced `attempt`).
        var reconnects = 0
        /// Whether the current connection delivered an event.
        var delivered = false
        /// The events of the last chunk not yet handed out, from ``nextEvent``. Reused, so no allocation per chunk.
        var events: [ServerSentEvent] = []
        var nextEvent = 0
        /// A state change to hand out before anything else (the `connecting` that follows `reconnecting`).
        var pendingState: SubscriptionStateChange?

        init(transport: any HTTPStreamingTransport, configuration: EventSourceConfiguration) {
            self.transport = transport
            self.configuration = configuration
            parser = ServerSentEventParser(
                lastEventID: configuration.lastEventID, maxLineLength: configuration.maxLineLength,
                maxEventSize: configuration.maxEventSize)
            policy = EventStreamReconnectPolicy(capMilliseconds: configuration.maxBackoffMilliseconds)
        }

        /// The next update; `nil` after `closed` or once the consuming task was cancelled.
        public mutating func next() async -> EventSourceUpdate? {
            while true {
                if Task.isCancelled { return end() }
                if let state = pendingState {
                    pendingState = nil
                    return .state(state)
                }
                if nextEvent < events.count {
                    let event = events[nextEvent]
                    nextEvent += 1
                    return .event(event)
                }
                switch phase {
                case .finished, .reading:
                    return nil
                case .connect(let attempt):
                    phase = .connecting(attempt: attempt)
                    return .state(SubscriptionStateChange(state: .connecting, attempt: attempt))
                case .connecting:
                    if let update = await connect() { return update }
                case .streaming(var body):
                    phase = .reading  // the iterator is moved out while reading; put back below
                    let update = await read(&body)
                    if case .reading = phase { phase = .streaming(body) }
                    if let update { return update }
                case .waiting(let attempt, let delay):
                    do {
                        try await configuration.sleep(.milliseconds(delay))
                    } catch {
                        return end()
                    }
                    if Task.isCancelled { return end() }
                    phase = .connect(attempt: attempt)
                }
            }
        }

        /// Ends quietly (cancellation): no `closed`, the caller announces its own.
        mutating func end() -> EventSourceUpdate? {
            phase = .finished
            events.removeAll(keepingCapacity: false)
            return nil
        }

        /// Ends with `closed`.
        mutating func close(status: Int? = nil, kind: ErrorKind? = nil, message: String = "") -> EventSourceUpdate {
            phase = .finished
            let failure = kind.map { EventSourceFailure(kind: $0, message: message) }
            Logger.shared.debug(
                "event stream closed", [("status", status.map(String.init) ?? "-"), ("kind", kind?.rawValue ?? "-")])
            return .state(SubscriptionStateChange(state: .closed, status: status, error: failure))
        }

        /// Announces a reconnect after the backoff delay (at least `minimumDelay` ms).
        mutating func reconnect(status: Int? = nil, kind: ErrorKind?, message: String, minimumDelay: Int = 0)
            -> EventSourceUpdate
        {
            parser.finish()
            if delivered {
                policy.connectionDeliveredEvent()
                reconnects = 0
                delivered = false
            }
            if let retry = parser.retry, retry != policy.serverRetryMilliseconds {
                policy.serverRequestedRetry(milliseconds: retry)
            }
            var random = SystemRandomNumberGenerator()
            let step = policy.nextAttempt(using: &random)
            let delay = Swift.max(
                minimumDelay, policy.delayMilliseconds(forAttempt: step.attempt, jitter: configuration.jitter()))
            reconnects += 1
            phase = .waiting(attempt: reconnects, delayMilliseconds: delay)
            let failure = kind.map { EventSourceFailure(kind: $0, message: message) }
            Logger.shared.debug(
                "event stream reconnecting",
                [("attempt", String(reconnects)), ("delayMs", String(delay)), ("kind", kind?.rawValue ?? "-")])
            return .state(
                SubscriptionStateChange(
                    state: .reconnecting, attempt: reconnects, retryInMs: delay, status: status, error: failure))
        }

        /// The request of the next connection, without credentials.
        func connectionRequest() -> HTTPRequest {
            var request = configuration.request
            request.method = "GET"
            request.body = nil
            request.timeout = nil
            if let connectTimeout = configuration.connectTimeout { request.connectTimeout = connectTimeout }
            request.headers.set(name: "Accept", value: "text/event-stream")
            request.headers.set(name: "Cache-Control", value: "no-cache")
            if let id = parser.lastEventID {
                request.headers.set(name: "Last-Event-ID", value: id)
            } else {
                request.headers.remove("Last-Event-ID")
            }
            return request
        }
    }
}
