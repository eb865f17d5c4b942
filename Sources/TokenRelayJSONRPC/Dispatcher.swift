import Synchronization
import TokenRelayLogging
import TokenRelayPlatform

/// Bounds on concurrent work (SPEC §7 "Concurrency limits").
public struct DispatcherLimits: Sendable {
    /// Requests executing at once. Default 256.
    public var maximumConcurrent: Int
    /// Requests waiting for a slot. Default 10,000; past it a request is answered at once with
    /// kind `limit`.
    public var maximumQueued: Int

    public init(maximumConcurrent: Int = 256, maximumQueued: Int = 10_000) {
        self.maximumConcurrent = max(1, maximumConcurrent)
        self.maximumQueued = max(0, maximumQueued)
    }
}

/// Routes decoded messages to method handlers, each request in its own task, and writes every
/// answer. Keeps the in-flight table for cancellation (`$/cancelRequest {id}` and
/// `notifications/cancelled {requestId}`: the cancelled request is always answered, with
/// -32800), bounds concurrency with a bounded queue, and answers batches as arrays.
///
/// ``receive(_:)`` is called by the one reader of stdin at a time (its own thread, or the transfer
/// loop that took stdin over: ``StdioReader``), in read order, and never blocks on output.
public final class Dispatcher: Sendable {
    /// A request waiting for an execution slot.
    private struct Pending: Sendable {
        let request: RPCRequest
        let handler: MethodHandler
        let batch: BatchCollector?
    }

    /// A request that is queued or executing.
    private struct Entry {
        var task: Task<Void, Never>?
        /// Whether the request counts in `running`: false for an unbounded method, and while its
        /// handler waits outside its slot (``RequestContext/withoutExecutionSlot(_:)``).
        var holdsSlot = true
        /// Set once the request is cancelled: the error it is answered with.
        var cancelledWith: RPCError?
        /// Cancelled by its client with `notifications/cancelled` on a dispatcher that does not
        /// answer those (MCP): no answer is written.
        var silent = false
    }

    /// A request whose handler waits to take its slot back.
    private struct SlotWaiter {
        let id: RequestID
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        /// Requests holding an execution slot (at most `maximumConcurrent`).
        var running = 0
        /// Requests executing without a slot: unbounded methods, and handlers waiting outside
        /// their slot (for a person, say).
        var outside = 0
        /// Handlers waiting to take their slot back, by ticket, served before queued requests
        /// (they have started already); `slotQueue` keeps their order.
        var slotWaiters: [Int: SlotWaiter] = [:]
        var slotQueue: [Int] = []
        var nextSlotTicket = 0
        /// Ids in arrival order; an id whose entry left `queued` (cancelled) is skipped.
        var queue: [RequestID] = []
        var queueHead = 0
        var queued: [RequestID: Pending] = [:]
        var inFlight: [RequestID: Entry] = [:]
        var shuttingDown = false
        /// The shutdown request has been read (not merely ``beginShutdown()``).
        var shutdownReceived = false
        /// Callers of ``waitUntilIdle()`` by ticket (a cancelled wait removes its own).
        var idleWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextIdleTicket = 0

        var queuedCount: Int { queued.count }
        var isIdle: Bool { running == 0 && queuedCount == 0 && outside == 0 }
    }

    private let methods: [String: MethodHandler]
    private let notificationHandlers: [String: MethodHandler]
    private let readOrderNotificationHandlers: [String: @Sendable (RequestContext) -> Void]
    private let sink: MessageSink
    private let limits: DispatcherLimits
    private let errorMapper: @Sendable (any Error) -> RPCError
    private let shutdownMethod: String?
    private let placement: MethodPlacement
    private let responseHandler: (@Sendable (RequestID, JSONValue?, JSONValue?) -> Void)?
    private let answersClientCancellation: Bool
    private let unboundedMethods: Set<String>
    /// Guarded by the mutex: slots, queue, in-flight table, lifecycle.
    private let state = Mutex(State())

    /// - Parameters:
    ///   - methods: request handlers by method name.
    ///   - notifications: notification handlers by method name (unknown notifications are ignored).
    ///   - readOrderNotifications: notification handlers that run at once on the stdin reader,
    ///     in read order, before the next message (or the end of input) is seen; they must not
    ///     block (`exit` decides the exit code here, so no later event can overtake it).
    ///   - shutdownMethod: the request after which every new request is refused with kind
    ///     `shutting_down` (decided when it is read, so the order of requests is respected).
    ///   - errorMapper: the one place that turns any thrown error into a wire error.
    ///   - placement: where each method's requests run (the server's placement decision, as data).
    ///   - responses: where answers to the server's own requests go (id, `result`, `error`), on the
    ///     stdin reader; it must not block. `nil`: they are ignored.
    ///   - answersClientCancellation: whether a request cancelled by `notifications/cancelled` is
    ///     answered (-32800: tokenrelay's protocol) or not (MCP: "SHOULD NOT send a response"; a
    ///     request inside a batch is still answered, so the batch stays whole).
    ///   - unboundedMethods: methods that start at once without an execution slot, however many
    ///     requests run or wait (MCP's `ping` and `tools/list`: local answers that must never
    ///     wait behind transfers). Their handlers must not do work that the limit should bound.
    public init(
        methods: [String: MethodHandler], notifications: [String: MethodHandler] = [:],
        readOrderNotifications: [String: @Sendable (RequestContext) -> Void] = [:], sink: MessageSink,
        limits: DispatcherLimits = DispatcherLimits(), shutdownMethod: String? = "shutdown",
        errorMapper: @escaping @Sendable (any Error) -> RPCError,
        placement: MethodPlacement = MethodPlacement(),
        responses: (@Sendable (RequestID, JSONValue?, JSONValue?) -> Void)? = nil,
        answersClientCancellation: Bool = true, unboundedMethods: Set<String> = []
    ) {
        self.answersClientCancellation = answersClientCancellation
        self.unboundedMethods = unboundedMethods
        self.responseHandler = responses
        self.shutdownMethod = shutdownMethod
        self.placement = placement
        self.methods = methods
        self.notificationHandlers = notifications
        self.readOrderNotificationHandlers = readOrderNotifications
        self.sink = sink
        self.limits = limits
        self.errorMapper = errorMapper
    }

    /// The method names this dispatcher answers, including the built-in cancellation ones.
    public var methodNames: Set<String> {
        Set(methods.keys).union(notificationHandlers.keys).union(readOrderNotificationHandlers.keys).union(
            Self.cancelMethods)
    }

    static let cancelMethods: Set<String> = ["$/cancelRequest", "notifications/cancelled"]

    // MARK: - Input

    /// Handles one framed message body (called by the stdin reader).
    public func receive(_ body: [UInt8]) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(body)
        } catch {
            reply(nil, error: .parseError("parse error: \(error)"), batch: nil)
            return
        }
        if case .array(let elements) = value {
            receiveBatch(elements)
        } else {
            receiveSingle(MessageCodec.decode(value), batch: nil)
        }
    }

    /// Answers a bad frame with `id: null` (called by the stdin reader).
    public func receive(framingError: FramingError) {
        log.debug("bad frame: \(framingError)")
        let error: RPCError =
            switch framingError {
            case .invalidContentLength, .missingContentLength: .parseError("bad frame: \(framingError)")
            case .messageTooLarge, .headerTooLarge: .invalidRequest("bad frame: \(framingError)")
            }
        reply(nil, error: error, batch: nil)
    }

    private func receiveBatch(_ elements: [JSONValue]) {
        guard !elements.isEmpty else {
            reply(nil, error: .invalidRequest("empty batch"), batch: nil)
            return
        }
        let messages = elements.map(MessageCodec.decode)
        let expected = messages.reduce(0) { count, message in
            switch message {
            case .request(let request): count + (request.isNotification ? 0 : 1)
            case .invalid: count + 1
            case .response, .invalidNotification: count
            }
        }
        let batch = expected > 0 ? BatchCollector(expected: expected, sink: sink) : nil
        for message in messages {
            receiveSingle(message, batch: batch)
        }
    }

    private func receiveSingle(_ message: IncomingMessage, batch: BatchCollector?) {
        switch message {
        case .response(let id, let result, let error):
            guard let responseHandler, let id else {
                log.debug("ignoring a response: this server sent no request")
                return
            }
            responseHandler(id, result, error)
        case .invalid(let id, let error):
            reply(id, error: error, batch: batch)
        case .invalidNotification(let method, let error):
            log.debug("ignoring an invalid notification \(method?.prefix(100) ?? "(no method name)"): \(error.message)")
        case .request(let request):
            if request.isNotification {
                receiveNotification(request)
            } else {
                receiveRequest(request, batch: batch)
            }
        }
    }

    private func receiveNotification(_ request: RPCRequest) {
        switch request.method {
        case "$/cancelRequest":
            if let raw = request.params?["id"], let id = RequestID(raw) { cancel(id) }
        case "notifications/cancelled":
            if let raw = request.params?["requestId"], let id = RequestID(raw) {
                cancel(id, silently: !answersClientCancellation)
            }
        default:
            let afterShutdown = state.withLock { $0.shutdownReceived }
            let context = RequestContext(id: nil, inBatch: false, sink: sink, afterShutdown: afterShutdown)
            if let readOrderHandler = readOrderNotificationHandlers[request.method] {
                readOrderHandler(context)
                return
            }
            guard let handler = notificationHandlers[request.method] else {
                log.debug("ignoring unknown notification \(request.method)")
                return
            }
            Placement.detached(.pool) {
                do {
                    _ = try await handler(request.params, context)
                } catch {
                    log.debug("notification \(request.method) failed: \(error)")
                }
            }
        }
    }

    private func receiveRequest(_ request: RPCRequest, batch: BatchCollector?) {
        guard let id = request.id else { return }
        guard let handler = methods[request.method] else {
            reply(id, error: .methodNotFound(request.method), batch: batch)
            return
        }
        enum Decision {
            case start
            case queued
            case reject(RPCError)
        }
        let decision: Decision = state.withLock { state in
            if state.shuttingDown { return .reject(.shuttingDown) }
            if state.inFlight[id] != nil {
                return .reject(.invalidRequest("a request with id \(id) is already in flight"))
            }
            if request.method == shutdownMethod {
                state.shuttingDown = true
                state.shutdownReceived = true
            }
            if unboundedMethods.contains(request.method) {
                state.outside += 1
                state.inFlight[id] = Entry(holdsSlot: false)
                return .start
            }
            if state.running < limits.maximumConcurrent {
                state.running += 1
                state.inFlight[id] = Entry()
                return .start
            }
            if state.queuedCount < limits.maximumQueued {
                state.queue.append(id)
                state.queued[id] = Pending(request: request, handler: handler, batch: batch)
                state.inFlight[id] = Entry()
                return .queued
            }
            return .reject(
                RPCError(
                    code: .limit,
                    message:
                        "too many requests: \(limits.maximumConcurrent) executing and \(limits.maximumQueued) queued"))
        }
        switch decision {
        case .start: start(Pending(request: request, handler: handler, batch: batch))
        case .queued: break
        case .reject(let error): reply(id, error: error, batch: batch)
        }
    }

    // MARK: - Execution

    /// Starts a request whose slot is already counted in `running` (or, for an unbounded method,
    /// in `outside`).
    private func start(_ pending: Pending) {
        guard let id = pending.request.id else { return }
        var context = RequestContext(id: id, inBatch: pending.batch != nil, sink: sink)
        context.slot = ExecutionSlot(dispatcher: self, id: id)
        let task = Placement.detached(.executor(placement.executor(for: pending.request))) { [self] in
            let response: [UInt8]
            if Task.isCancelled {
                response = MessageCodec.response(id: id, error: .cancelled)
            } else {
                do {
                    let result = try await pending.handler(pending.request.params, context)
                    response = MessageCodec.response(id: id, result: result)
                } catch {
                    response = MessageCodec.response(id: id, error: errorMapper(error))
                }
            }
            // Handed on, not copied: the writer frames it in place (a second owner would make
            // appending the newline copy the whole answer).
            await finish(id: id, response: consume response, batch: pending.batch)
            context.replyHandedOver.fire()
        }
        let cancelNow: Bool = state.withLock { state in
            guard var entry = state.inFlight[id] else { return false }
            entry.task = task
            state.inFlight[id] = entry
            return entry.cancelledWith != nil
        }
        if cancelNow { task.cancel() }
    }

    /// Records the end of a request, hands its answer to the sink, then frees its slot (starting
    /// the next queued request). The slot is held until the answer is handed over, so "idle"
    /// means every answer is with the writer, and a slow peer slows the execution of new work.
    private func finish(id: RequestID, response: consuming [UInt8], batch: BatchCollector?) async {
        var answer = response
        let entry = state.withLock { $0.inFlight.removeValue(forKey: id) }
        let held = entry?.holdsSlot != false
        if let cancelledWith = entry?.cancelledWith {
            if entry?.silent == true && batch == nil {
                releaseSlot(held: held)
                return
            }
            answer = MessageCodec.response(id: id, error: cancelledWith)
        }
        if let batch {
            await batch.add(answer)
        } else {
            await sink.send(consume answer)
        }
        releaseSlot(held: held)
    }

    /// Who takes a freed slot.
    private enum Handoff {
        case none
        /// A handler that waited outside its slot takes it back.
        case waiter(CheckedContinuation<Bool, Never>)
        /// The next queued request starts in it.
        case queued(Pending)
    }

    /// Gives a freed slot to the first handler waiting to take its own back, else to the next
    /// queued request, else counts it free. Called with the lock held.
    private func handOffSlot(_ state: inout State) -> Handoff {
        while let ticket = state.slotQueue.first {
            state.slotQueue.removeFirst()
            guard let waiter = state.slotWaiters.removeValue(forKey: ticket) else { continue }
            if var entry = state.inFlight[waiter.id] {
                entry.holdsSlot = true
                state.inFlight[waiter.id] = entry
            }
            state.outside -= 1
            return .waiter(waiter.continuation)
        }
        var next: Pending?
        while state.queueHead < state.queue.count {
            let candidateID = state.queue[state.queueHead]
            state.queueHead += 1
            if let candidate = state.queued.removeValue(forKey: candidateID) {
                next = candidate
                break
            }
        }
        if state.queueHead > 1024 && state.queueHead * 2 > state.queue.count {
            state.queue.removeFirst(state.queueHead)
            state.queueHead = 0
        }
        guard let next else {
            state.running -= 1
            return .none
        }
        return .queued(next)
    }

    private func perform(_ handoff: Handoff) {
        switch handoff {
        case .none: break
        case .waiter(let continuation): continuation.resume(returning: true)
        case .queued(let next): start(next)
        }
    }

    /// Frees a finished request's slot (`held`; else it ran outside one): hands it on
    /// (``handOffSlot(_:)``) and wakes the callers of ``waitUntilIdle()`` when nothing is left.
    /// Synchronous, so that its state is not kept in every request's async frame.
    private func releaseSlot(held: Bool) {
        let (handoff, idleWaiters): (Handoff, [CheckedContinuation<Void, Never>]) = state.withLock { state in
            var handoff = Handoff.none
            if held {
                handoff = handOffSlot(&state)
            } else {
                state.outside -= 1
            }
            var waiters: [CheckedContinuation<Void, Never>] = []
            if state.isIdle {
                waiters = Array(state.idleWaiters.values)
                state.idleWaiters = [:]
            }
            return (handoff, waiters)
        }
        perform(handoff)
        for waiter in idleWaiters { waiter.resume() }
    }

    /// The executing request `id` stops holding its slot (handed on at once); false when it held
    /// none (an unbounded method, or already outside).
    func leaveSlot(_ id: RequestID) -> Bool {
        let handoff: Handoff? = state.withLock { state in
            guard var entry = state.inFlight[id], entry.holdsSlot else { return nil }
            entry.holdsSlot = false
            state.inFlight[id] = entry
            state.outside += 1
            return handOffSlot(&state)
        }
        guard let handoff else { return false }
        perform(handoff)
        return true
    }

    /// The request `id`, which left its slot, takes one again: at once when one is free, else
    /// before any queued request starts. False when the calling task is cancelled first (the
    /// request then finishes outside a slot).
    func retakeSlot(_ id: RequestID) async -> Bool {
        let ticket: Int = state.withLock { state in
            defer { state.nextSlotTicket += 1 }
            return state.nextSlotTicket
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { state in
                    if Task.isCancelled { return false }
                    guard var entry = state.inFlight[id], !entry.holdsSlot else { return true }
                    if state.running < limits.maximumConcurrent {
                        state.running += 1
                        state.outside -= 1
                        entry.holdsSlot = true
                        state.inFlight[id] = entry
                        return true
                    }
                    state.slotWaiters[ticket] = SlotWaiter(id: id, continuation: continuation)
                    state.slotQueue.append(ticket)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.slotWaiters.removeValue(forKey: ticket) }
            waiter?.continuation.resume(returning: false)
        }
    }

    /// Answers at once, without a task (errors found while reading).
    private func reply(_ id: RequestID?, error: RPCError, batch: BatchCollector?) {
        let response = MessageCodec.response(id: id, error: errorMapper(error))
        if let batch {
            batch.addNow(response)
        } else {
            sink.sendNow(response)
        }
    }

    // MARK: - Cancellation and lifecycle

    /// Cancels a queued or executing request; it is answered with `error` (-32800 by default),
    /// unless `silently` (and it is not part of a batch). Unknown ids are ignored.
    public func cancel(_ id: RequestID, answering error: RPCError = .cancelled, silently: Bool = false) {
        enum Action {
            case none
            case cancelTask(Task<Void, Never>?)
            case answerQueued(BatchCollector?)
        }
        let action: Action = state.withLock { state in
            guard var entry = state.inFlight[id] else { return .none }
            if let pending = state.queued.removeValue(forKey: id) {
                state.inFlight[id] = nil
                return silently && pending.batch == nil ? .none : .answerQueued(pending.batch)
            }
            if entry.cancelledWith == nil {
                entry.cancelledWith = error
                entry.silent = silently
            }
            state.inFlight[id] = entry
            return .cancelTask(entry.task)
        }
        switch action {
        case .none: break
        case .cancelTask(let task): task?.cancel()
        case .answerQueued(let batch): reply(id, error: error, batch: batch)
        }
    }

    /// After this, new requests are answered with kind `shutting_down`.
    public func beginShutdown() {
        state.withLock { $0.shuttingDown = true }
    }

    /// Whether ``beginShutdown()`` was called.
    public var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    /// The number of requests queued or executing.
    public var inFlightCount: Int { state.withLock { $0.inFlight.count } }

    /// Waits until no request is queued or executing, or until the calling task is cancelled
    /// (then it returns at once, whether idle or not), so a caller can bound the wait.
    public func waitUntilIdle() async {
        let ticket: Int = state.withLock { state in
            defer { state.nextIdleTicket += 1 }
            return state.nextIdleTicket
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = state.withLock { state in
                    // A cancellation that came first has already run its handler: do not wait.
                    if state.isIdle || Task.isCancelled { return true }
                    state.idleWaiters[ticket] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.idleWaiters.removeValue(forKey: ticket) }
            waiter?.resume()
        }
    }

    /// Cancels every queued and executing request; each is answered with `error` (-32800 by
    /// default; the server passes kind `shutting_down` when it stops).
    public func cancelAll(answering error: RPCError = .cancelled) {
        let ids = state.withLock { Array($0.inFlight.keys) }
        for id in ids { cancel(id, answering: error) }
    }
}

/// Collects the answers of one batch (each its JSON text) and writes them as one array when the
/// last arrives.
final class BatchCollector: Sendable {
    private struct State {
        var answers: [UInt8] = [UInt8(ascii: "[")]
        var remaining: Int
    }

    /// Guarded by the mutex.
    private let state: Mutex<State>
    private let sink: MessageSink

    init(expected: Int, sink: MessageSink) {
        state = Mutex(State(remaining: expected))
        self.sink = sink
    }

    private func append(_ answer: [UInt8]) -> [UInt8]? {
        state.withLock { state in
            if state.answers.count > 1 { state.answers.append(UInt8(ascii: ",")) }
            state.answers.append(contentsOf: answer)
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            state.answers.append(UInt8(ascii: "]"))
            return state.answers
        }
    }

    /// Adds an answer; writes the batch (waiting on back-pressure) when complete.
    func add(_ answer: [UInt8]) async {
        if let complete = append(answer) { await sink.send(complete) }
    }

    /// Adds an answer; writes the batch without waiting when complete.
    func addNow(_ answer: [UInt8]) {
        if let complete = append(answer) { sink.sendNow(complete) }
    }
}
