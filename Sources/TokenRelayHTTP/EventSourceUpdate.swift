import TokenRelayErrorKinds
import TokenRelayLogging

/// What an ``EventSource`` yields: a change of the subscription's state, or one event of the stream.
public enum EventSourceUpdate: Sendable, Hashable {
    /// The subscription changed state (SPEC `subscription-state` notification).
    case state(SubscriptionStateChange)
    /// One dispatched event (SPEC `event` notification).
    case event(ServerSentEvent)
}

/// One `subscription-state` notification: `{state, attempt?, retryInMs?, status?, error?}`.
///
/// - `connecting {attempt}`: a connection is being made. The first connection has attempt 0; each reconnect counts
///   1, 2, … since the last connection that delivered an event.
/// - `open {status: 200}`: the server answered `200 text/event-stream`; events follow.
/// - `reconnecting {attempt, retryInMs, status?, error?}`: the connection ended; announced before waiting
///   `retryInMs` (0 for the immediate replay after `401 invalid_token`), then `connecting {attempt}` follows.
/// - `closed {status?, error?}`: the subscription ended for good; the sequence ends after it.
public struct SubscriptionStateChange: Sendable, Hashable, CustomStringConvertible {
    /// The states of a subscription, spelled as on the wire.
    public enum State: String, Sendable, Hashable {
        case connecting, open, reconnecting, closed
    }

    /// The new state.
    public var state: State
    /// The connection attempt: 0 for the first connection, then 1, 2, … counting reconnects since the last connection
    /// that delivered an event. Present with `connecting` and `reconnecting`.
    public var attempt: Int?
    /// The delay before the next connection, in milliseconds; present with `reconnecting`.
    public var retryInMs: Int?
    /// The HTTP status that caused the change, when one did (`open`: 200).
    public var status: Int?
    /// Why the connection ended, when it ended in a failure.
    public var error: EventSourceFailure?

    /// Creates a state change.
    public init(
        state: State, attempt: Int? = nil, retryInMs: Int? = nil, status: Int? = nil, error: EventSourceFailure? = nil
    ) {
        self.state = state
        self.attempt = attempt
        self.retryInMs = retryInMs
        self.status = status
        self.error = error
    }

    /// A summary for logs (never a token or a body: failures carry neither).
    public var description: String {
        var text = state.rawValue
        if let attempt { text += " attempt=\(attempt)" }
        if let retryInMs { text += " retryInMs=\(retryInMs)" }
        if let status { text += " status=\(status)" }
        if let error { text += " error=\(error)" }
        return text
    }
}

/// Why a connection of a subscription failed: the SPEC's `{kind, message}`. The message never holds a token, a header
/// value or a body.
public struct EventSourceFailure: KindedError, Sendable, Hashable, CustomStringConvertible {
    /// A stable kind: `auth`, `interaction_required`, `transport`, `timeout`, `http_status`, `protocol`, `limit`,
    /// `invalid_params`, `cancelled`, or whatever kind a credential error exposes through ``KindedError``.
    public var kind: ErrorKind
    /// A human-readable reason.
    public var message: String

    /// Creates a failure.
    public init(kind: ErrorKind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }

    public var errorKind: ErrorKind { kind }

    /// The credentials were refused or could not be had. When a ``CredentialSource`` throws a
    /// ``KindedError`` (the token manager's `AuthError` says `interaction_required`...), the
    /// subscription closes with that kind instead; its `description` becomes the message, so it
    /// must be redacted.
    public static let auth = ErrorKind.auth
    /// The connection failed (DNS, TCP, TLS, dropped mid-stream).
    public static let transport = ErrorKind.transport
    /// The connect timeout or the idle timeout ran out.
    public static let timeout = ErrorKind.timeout
    /// The server answered a status that is not a stream.
    public static let httpStatus = ErrorKind.httpStatus
    /// The response was not a valid event stream (content type, line or event too large).
    public static let `protocol` = ErrorKind.protocol
    /// The request cannot be sent as built (URL or header refused): the wire kind of -32602.
    public static let invalidRequest = ErrorKind.invalidParams

    /// The failure an error of the pipeline that is not the connection's stands for: its
    /// ``KindedError`` kind, else `auth`; its description, redacted, as the message.
    @Sendable public static func describing(_ error: any Error) -> EventSourceFailure {
        let kind = (error as? any KindedError)?.errorKind ?? auth
        return EventSourceFailure(kind: kind, message: Redactor.shared.redact(String(describing: error)))
    }
}
