/// One event dispatched from a `text/event-stream` body, as the WHATWG HTML standard's "interpreting an event stream"
/// defines it (§9.2.6). Produced by ``ServerSentEventParser``.
public struct ServerSentEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event type: the block's last `event` field, or `message` when it had none (or an empty one).
    public var type: String
    /// The block's `data` fields joined with `\n` (no trailing newline). Invalid UTF-8 became U+FFFD.
    public var data: String
    /// The last event ID in effect when the event was dispatched (WHATWG `lastEventId`): the latest `id` field of this
    /// block or an earlier one. `nil` when no ID was ever set, or the latest `id` field was empty (a reset).
    public var lastEventID: String?
    /// The reconnection time in milliseconds, present only when this event's own block carried a valid `retry` field.
    public var retry: Int?

    /// Creates an event; `type` defaults to `message` as for a block without an `event` field.
    public init(type: String = "message", data: String, lastEventID: String? = nil, retry: Int? = nil) {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
        self.retry = retry
    }

    /// A summary for logs: the type, the ID and the size of the data, never the data itself (it may hold secrets).
    public var description: String {
        var text = "ServerSentEvent(type: \(type), data: \(data.utf8.count) bytes"
        if let lastEventID { text += ", id: \(lastEventID)" }
        if let retry { text += ", retry: \(retry) ms" }
        return text + ")"
    }
}

/// Why an event stream could not be parsed. Both cases bound the memory a hostile or broken server can make the parser
/// hold; after either, the parser stays failed (feeding it again rethrows) and the connection should be dropped.
public enum ServerSentEventError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A line (without its line ending) was longer than `limit` bytes.
    case lineTooLong(limit: Int)
    /// An event's data (its `data` lines joined with `\n`) grew past `limit` bytes.
    case eventTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .lineTooLong(let limit): "event stream line exceeds the limit of \(limit) bytes"
        case .eventTooLarge(let limit): "event stream event data exceeds the limit of \(limit) bytes"
        }
    }
}
