import ErrorKinds
import Logging

extension EventSource.AsyncIterator {
    /// Makes one connection and classifies its response. Returns the update to hand out, or `nil` to go on.
    mutating func connect() async -> EventSourceUpdate? {
        if Task.isCancelled { return end() }
        var request = connectionRequest()
        var stamp: CredentialStamp?
        if let credentials = configuration.credentials {
            do {
                stamp = try await credentials.apply(to: &request)
            } catch {
                if Self.isCancellation(error) { return end() }
                return close(kind: Self.kind(of: error), message: Self.message(of: error))
            }
        }
        let response: HTTPStreamingResponse
        do {
            response = try await transport.stream(request, idleTimeout: configuration.idleTimeout)
        } catch {
            if Self.isCancellation(error) { return end() }
            return connectionFailed(error)
        }
        if Task.isCancelled {
            response.cancel()
            return end()
        }
        return await classify(response, stamp: stamp)
    }

    /// Decides what a response head means for the subscription.
    mutating func classify(_ response: HTTPStreamingResponse, stamp: CredentialStamp?) async -> EventSourceUpdate? {
        let status = response.status
        if status == 200 {
            guard Self.isEventStream(response.headers["Content-Type"]) else {
                response.cancel()
                return close(
                    status: status, kind: EventSourceFailure.protocol,
                    message: "the response is not an event stream (content type is not text/event-stream)")
            }
            budget.connectionOpened()
            delivered = false
            phase = .streaming(response.body.makeAsyncIterator())
            return .state(SubscriptionStateChange(state: .open, status: status))
        }
        response.cancel()
        switch status {
        case 204:
            return close(status: status)
        case 401:
            let challenged = WWWAuthenticateChallenge.parse(headers: response.headers).contains {
                $0.isScheme("Bearer") && $0.parameter("error") == "invalid_token"
            }
            guard challenged, let credentials = configuration.credentials, credentials.isRenewable, let stamp,
                budget.consume()
            else {
                return close(
                    status: status, kind: EventSourceFailure.auth, message: "the server refused the credentials")
            }
            do {
                try await credentials.invalidate(stamp: stamp)
            } catch {
                if Self.isCancellation(error) { return end() }
                return close(status: status, kind: Self.kind(of: error), message: Self.message(of: error))
            }
            if Task.isCancelled { return end() }
            parser.finish()
            reconnects += 1
            phase = .waiting(attempt: reconnects, delayMilliseconds: 0)
            Logger.shared.debug("event stream: 401 invalid_token, reconnecting once with a renewed credential")
            return .state(
                SubscriptionStateChange(
                    state: .reconnecting, attempt: reconnects, retryInMs: 0, status: status,
                    error: EventSourceFailure(kind: EventSourceFailure.auth, message: "the access token was rejected")))
        case 408, 429, 500...599:
            let minimum = Self.retryAfterMilliseconds(response.headers["Retry-After"]) ?? 0
            return reconnect(
                status: status, kind: EventSourceFailure.httpStatus, message: "the server answered \(status)",
                minimumDelay: minimum)
        default:
            return close(status: status, kind: EventSourceFailure.httpStatus, message: "the server answered \(status)")
        }
    }

    /// Reads the next chunk of an open connection into ``events``. Returns an update to hand out, or `nil` to go on.
    mutating func read(_ body: inout HTTPByteStream.AsyncIterator) async -> EventSourceUpdate? {
        let chunk: [UInt8]?
        do {
            chunk = try await body.next()
        } catch {
            if Self.isCancellation(error) { return end() }
            return connectionFailed(error)
        }
        guard let chunk else {
            // A clean end of the body: servers do this to rebalance; reconnect without an error.
            return reconnect(kind: nil, message: "")
        }
        events.removeAll(keepingCapacity: true)
        nextEvent = 0
        do {
            try parser.feed(chunk, into: &events)
        } catch {
            // Events completed before the fault are handed out first: the reconnect waits in `pendingState`.
            if !events.isEmpty { delivered = true }
            body.controller?.cancel()
            let update = reconnect(kind: EventSourceFailure.protocol, message: error.description)
            if events.isEmpty { return update }
            if case .state(let state) = update { pendingState = state }
            return nil
        }
        if !events.isEmpty { delivered = true }
        return nil
    }

    /// A connection that could not be made or broke: reconnect with the error's kind, or close when
    /// the error is final (an unusable URL or header, a TLS certificate or handshake failure).
    mutating func connectionFailed(_ error: any Error) -> EventSourceUpdate {
        switch error {
        case let stalled as HTTPStreamStalled:
            return reconnect(kind: EventSourceFailure.timeout, message: stalled.description)
        case HTTPError.timeout:
            return reconnect(kind: EventSourceFailure.timeout, message: "the connection timed out")
        case let http as HTTPError:
            // What no reconnect can cure closes the subscription with its kind instead of looping.
            switch http {
            case .invalidURL, .invalidRequest:
                return close(kind: EventSourceFailure.invalidRequest, message: Redactor.shared.redact(http.description))
            case .tls:
                return close(kind: EventSourceFailure.transport, message: Redactor.shared.redact(http.description))
            default:
                return reconnect(kind: EventSourceFailure.transport, message: Redactor.shared.redact(http.description))
            }
        default:
            return reconnect(
                kind: EventSourceFailure.transport, message: Redactor.shared.redact(String(describing: error)))
        }
    }

    /// Whether `error` means the consumer's task was cancelled.
    static func isCancellation(_ error: any Error) -> Bool {
        Task.isCancelled || error is CancellationError || (error as? HTTPError) == .cancelled
    }

    /// The wire kind of a credential error.
    static func kind(of error: any Error) -> ErrorKind {
        (error as? any KindedError)?.errorKind ?? EventSourceFailure.auth
    }

    /// The redacted message of a credential error.
    static func message(of error: any Error) -> String {
        Redactor.shared.redact(String(describing: error))
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
