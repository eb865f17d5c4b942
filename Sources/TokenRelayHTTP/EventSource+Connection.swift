import Synchronization
import TokenRelayLogging

extension EventSource.AsyncIterator {
    /// Makes one connection through the pipeline and feeds its outcome to the machine.
    mutating func connect() async {
        if Task.isCancelled {
            _ = end()
            return
        }
        var request = connectionRequest()
        let replays = ReplayLog()
        request.replayObserver = { replays.record($0) }
        let outcome: Result<HTTPStreamingResponse, any Error>
        do {
            outcome = .success(try await transport.send(request))
        } catch {
            outcome = .failure(error)
        }
        let replay = replays.summary
        if case .failure(let error) = outcome, Self.isCancellation(error) {
            _ = end()
            return
        }
        if replay.replayed, let status = replay.status {
            // The credentials middleware renewed the credential and connected again: the immediate reconnect it is.
            parser.finish()
            pendingStates += machine.replayed(status: status)
            Logger.shared.debug("event stream: 401 invalid_token, reconnected once with a renewed credential")
        }
        switch outcome {
        case .success(let response):
            if Task.isCancelled {
                response.cancel()
                _ = end()
                return
            }
            apply(
                machine.responded(
                    status: response.status, contentType: response.headers["Content-Type"],
                    retryAfter: response.headers["Retry-After"], serverRetry: parser.retry,
                    jitter: configuration.jitter()),
                response: response)
        case .failure(let error):
            let failure =
                connectionFailure(error)
                ?? .middleware(configuration.describeFailure(error), status: replay.replayed ? nil : replay.status)
            apply(machine.failed(failure, serverRetry: parser.retry, jitter: configuration.jitter()))
        }
    }

    /// Reads the next chunk of an open connection into ``events`` and feeds the machine what it meant.
    mutating func read(_ body: inout HTTPByteStream.AsyncIterator) async {
        let chunk: [UInt8]?
        do {
            chunk = try await body.next()
        } catch {
            if Self.isCancellation(error) {
                _ = end()
                return
            }
            let failure =
                connectionFailure(error)
                ?? .connection(EventSourceFailure(kind: .transport, message: Self.redacted(error)), retryable: true)
            apply(machine.failed(failure, serverRetry: parser.retry, jitter: configuration.jitter()))
            return
        }
        guard let chunk else {
            apply(machine.bodyEnded(serverRetry: parser.retry, jitter: configuration.jitter()))
            return
        }
        events.removeAll(keepingCapacity: true)
        nextEvent = 0
        do {
            try parser.feed(chunk, into: &events)
        } catch {
            // Events completed before the fault are handed out first (``next()`` hands out events before states).
            if !events.isEmpty { machine.eventsDispatched() }
            body.controller?.cancel()
            apply(
                machine.streamInvalid(
                    message: error.description, serverRetry: parser.retry, jitter: configuration.jitter()))
            return
        }
        if !events.isEmpty { machine.eventsDispatched() }
    }

    /// How a connection or body error fails the connection: as the pipeline's error mapping describes it, final or
    /// not as the transport says; `nil` for an error that is not the connection's (a middleware's).
    func connectionFailure(_ error: any Error) -> EventStreamStateMachine.Failure? {
        switch error {
        case let stalled as HTTPStreamStalled:
            return .connection(configuration.describeFailure(stalled), retryable: true)
        case let http as HTTPError:
            return .connection(configuration.describeFailure(http), retryable: http.isRetryable)
        default:
            return nil
        }
    }

    /// An error's description, redacted.
    static func redacted(_ error: any Error) -> String {
        Redactor.shared.redact(String(describing: error))
    }

    /// Whether `error` means the consumer's task was cancelled.
    static func isCancellation(_ error: any Error) -> Bool {
        Task.isCancelled || error is CancellationError || (error as? HTTPError) == .cancelled
    }
}

/// What the middlewares reported of replays during one connection (``HTTPRequest/replayObserver``).
final class ReplayLog: Sendable {
    /// Guarded by the mutex: the status answered by a replay, and whether the replay was sent.
    private let state = Mutex<(status: Int?, replayed: Bool)>((nil, false))

    func record(_ event: HTTPReplayEvent) {
        state.withLock { state in
            switch event {
            case .answering(let status): state.status = status
            case .replaying(let status): state = (status, true)
            }
        }
    }

    var summary: (status: Int?, replayed: Bool) { state.withLock { $0 } }
}
