import TokenRelayLogging

/// A Server-Sent-Events subscription (SPEC §5.5, §7 "Events") as a pull-based sequence of ``EventSourceUpdate``s:
/// state changes and events, across dropped connections and expiring tokens, ending after `closed`.
///
/// Pull-based: nothing is read from the network until the consumer asks for the next update, and the only buffer is
/// the events of the chunk being handed out. A slow consumer leaves the transport's bounded buffer full, the transfer
/// is paused, and memory stays bounded with nothing dropped. There is no task of its own: the consumer's task does
/// all the work, so cancelling it (or dropping the iterator) cancels the transfer, the credential wait or the backoff
/// sleep in flight, and the sequence ends quietly (no `closed`: the caller announces its own).
///
/// Each connection is one streamed request through ``transport`` — in the relay an ``HTTPClient`` whose middlewares
/// (environment headers, origin policy, credentials with the subscription's auth-recovery budget, logging) are the ones
/// `request` uses — sending `GET` with `Accept: text/event-stream`, `Cache-Control: no-cache` and `Last-Event-ID` (the
/// last event ID in effect, when there is one). The event source does only the SSE work: it drives the connection and
/// the parser (``ServerSentEventParser``) and feeds what happened to ``EventStreamStateMachine``, which decides what
/// each response, failure and end of body means (open, reconnect with backoff, close; SPEC §5.5) and is documented
/// there. Errors of the pipeline that are not the connection's (a credential that cannot be had) close the
/// subscription with ``EventSourceConfiguration/describeFailure``'s kind.
public struct EventSource: AsyncSequence, Sendable {
    public typealias Element = EventSourceUpdate
    public typealias Failure = Never

    /// The pipeline connections are made through.
    public let transport: any HTTPTransport
    /// The subscription's settings.
    public let configuration: EventSourceConfiguration

    /// Creates a subscription; nothing happens until it is iterated. Each iteration is an independent subscription.
    public init(transport: any HTTPTransport, configuration: EventSourceConfiguration) {
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

        /// What the driver does next (the decisions are ``EventStreamStateMachine``'s).
        enum Phase {
            /// Ask the machine to start.
            case start
            /// `connecting` was announced: connect now.
            case connect
            /// Reading the body of an open connection.
            case streaming(HTTPByteStream.AsyncIterator)
            /// The body iterator is on loan to ``read(_:)``.
            case reading
            /// `reconnecting` was announced: wait, then connect.
            case waiting(milliseconds: Int)
            /// Done: `closed` was handed out or the consumer was cancelled.
            case finished
        }

        let transport: any HTTPTransport
        let configuration: EventSourceConfiguration
        var phase: Phase = .start
        var parser: ServerSentEventParser
        var machine: EventStreamStateMachine
        /// The events of the last chunk not yet handed out, from ``nextEvent``. Reused, so no allocation per chunk.
        var events: [ServerSentEvent] = []
        var nextEvent = 0
        /// State changes to hand out before anything else, in order (the machine's announcements; a reconnect decided
        /// after events of the same chunk waits behind them).
        var pendingStates: [SubscriptionStateChange] = []

        init(transport: any HTTPTransport, configuration: EventSourceConfiguration) {
            self.transport = transport
            self.configuration = configuration
            parser = ServerSentEventParser(
                lastEventID: configuration.lastEventID, maxLineLength: configuration.maxLineLength,
                maxEventSize: configuration.maxEventSize)
            machine = EventStreamStateMachine(
                policy: EventStreamReconnectPolicy(capMilliseconds: configuration.maxBackoffMilliseconds),
                untilClosed: configuration.untilClosed)
        }

        /// The next update; `nil` after `closed` or once the consuming task was cancelled.
        public mutating func next() async -> EventSourceUpdate? {
            while true {
                if Task.isCancelled { return end() }
                if nextEvent < events.count {
                    let event = events[nextEvent]
                    nextEvent += 1
                    return .event(event)
                }
                if !pendingStates.isEmpty { return .state(pendingStates.removeFirst()) }
                switch phase {
                case .finished, .reading:
                    return nil
                case .start:
                    apply(machine.start())
                case .connect:
                    await connect()
                case .streaming(var body):
                    phase = .reading  // the iterator is moved out while reading; put back below
                    await read(&body)
                    if case .reading = phase { phase = .streaming(body) }
                case .waiting(let delay):
                    do {
                        try await configuration.sleep(.milliseconds(delay))
                    } catch {
                        return end()
                    }
                    if Task.isCancelled { return end() }
                    apply(machine.waited())
                }
            }
        }

        /// Ends quietly (cancellation): no `closed`, the caller announces its own.
        mutating func end() -> EventSourceUpdate? {
            phase = .finished
            events.removeAll(keepingCapacity: false)
            pendingStates.removeAll()
            return nil
        }

        /// Does what the machine decided: queues its announcements and moves to its next step; `response` (the one
        /// at hand) is read on `readBody` and dropped otherwise.
        mutating func apply(_ transition: EventStreamStateMachine.Transition, response: HTTPStreamingResponse? = nil) {
            pendingStates += transition.announce
            for change in transition.announce where change.state == .closed || change.state == .reconnecting {
                Logger.shared.debug(
                    change.state == .closed ? "event stream closed" : "event stream reconnecting",
                    [
                        ("attempt", change.attempt.map(String.init) ?? "-"),
                        ("delayMs", change.retryInMs.map(String.init) ?? "-"),
                        ("status", change.status.map(String.init) ?? "-"), ("kind", change.error?.kind.rawValue ?? "-"),
                    ])
            }
            switch transition.next {
            case .connect:
                phase = .connect
            case .readBody:
                if let response {
                    phase = .streaming(response.body.makeAsyncIterator())
                    return
                }
            case .wait(let milliseconds):
                parser.finish()
                phase = .waiting(milliseconds: milliseconds)
            case .finish:
                phase = .finished
            }
            response?.cancel()
        }

        /// The request of the next connection, without credentials.
        func connectionRequest() -> HTTPRequest {
            var request = configuration.request
            request.method = "GET"
            request.body = nil
            request.timeout = nil
            request.deadline = nil
            request.delivery = .streamed(idleTimeout: configuration.idleTimeout)
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
