/// What a method handler knows about the request it serves, and how it talks back.
public struct RequestContext: Sendable {
    /// The request's id (`nil` for a notification).
    public let id: RequestID?
    /// Whether the request arrived inside a batch (long-lived methods refuse batches).
    public let inBatch: Bool
    /// Fires once the reply to this request has been handed to the writer: notifications
    /// that must follow the reply wait for it.
    public let replyHandedOver: OneShotSignal
    public let sink: MessageSink
    /// Whether the dispatcher's shutdown request had been read before this message (read order,
    /// whatever order the handlers run in): `exit` takes its exit code from it.
    public let afterShutdown: Bool

    public init(
        id: RequestID?, inBatch: Bool, sink: MessageSink, replyHandedOver: OneShotSignal = OneShotSignal(),
        afterShutdown: Bool = false
    ) {
        self.id = id
        self.inBatch = inBatch
        self.sink = sink
        self.replyHandedOver = replyHandedOver
        self.afterShutdown = afterShutdown
    }

    /// The dispatcher's execution slot of this request (`nil` outside a dispatcher).
    var slot: ExecutionSlot?

    /// Sends a notification to the peer (waits while the output is backed up).
    public func notify(_ method: String, _ params: JSONValue) async {
        await sink.send(MessageCodec.notification(method: method, params: params).serialized())
    }

    /// Runs `body`, a wait for a person (a consent question) and never work, without holding the
    /// request's execution slot: the concurrency limit counts calls doing work, so the slot goes
    /// to the next request meanwhile. When `body` returns the request takes a slot again (before
    /// any queued request), waiting for one if all are busy. Throws `CancellationError` when the
    /// request is cancelled while it waits for its slot (it then finishes outside one).
    public func withoutExecutionSlot<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        guard let slot, slot.dispatcher.leaveSlot(slot.id) else { return try await body() }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        guard await slot.dispatcher.retakeSlot(slot.id) else { throw CancellationError() }
        return try result.get()
    }
}

/// A request's place in its dispatcher's concurrency limit.
struct ExecutionSlot: Sendable {
    let dispatcher: Dispatcher
    let id: RequestID
}

/// Handles one method. Throws an ``RPCError`` (or any error the server's error mapper knows).
/// Its result is written into the answer as it is (a ``JSONValue``, or a result that writes its
/// own JSON); a notification's result is ignored.
public typealias MethodHandler =
    @Sendable (_ params: JSONValue?, _ context: RequestContext) async throws -> any JSONWritable

/// Sends notifications to the peer outside of any request (subscriptions, auth events).
public struct Notifier: Sendable {
    public let sink: MessageSink

    public init(sink: MessageSink) { self.sink = sink }

    /// Sends a notification (waits while the output is backed up).
    public func notify(_ method: String, _ params: JSONValue) async {
        await sink.send(MessageCodec.notification(method: method, params: params).serialized())
    }
}
