import Synchronization

/// A request body handed to the transport as it is produced (`tokenrelay exec`'s uploads), with
/// back-pressure: ``write(_:)`` waits while `capacity` bytes are queued, and the transfer pauses
/// while none is. It can be sent once: a request with one is never replayed.
///
/// The producer is a task; the consumer is the transfer loop's read callback (``read(into:)``).
/// Guarded by `state`; continuations and the wake-up run after the lock is released.
public final class HTTPRequestBodyStream: Sendable {
    /// The body's length when known (sent as `Content-Length`), else `nil` (chunked).
    public let length: Int?
    /// The bytes queued at most before ``write(_:)`` waits.
    public let capacity: Int

    private struct State {
        var queue: [UInt8] = []
        var offset = 0
        var finished = false
        var aborted = false
        /// The consumer found nothing and paused; the next write or the end wakes it.
        var consumerPaused = false
        var wake: (@Sendable () -> Void)?
        var writer: CheckedContinuation<Bool, Never>?
        var queued: Int { queue.count - offset }
    }

    private let state = Mutex(State())

    public init(length: Int?, capacity: Int = 1 << 20) {
        self.length = length
        self.capacity = capacity
    }

    /// Queues `bytes`, then waits while the queue is full. `false` once the transfer has ended
    /// (the rest will never be sent).
    public func write(_ bytes: [UInt8]) async -> Bool {
        let (wake, open) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
            guard !state.aborted else { return (nil, false) }
            state.queue += bytes
            return (takeWake(&state), true)
        }
        wake?()
        guard open else { return false }
        return await withCheckedContinuation { continuation in
            let now: Bool? = state.withLock { state in
                if state.aborted { return false }
                if state.queued < capacity { return true }
                state.writer = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }

    /// Marks the end of the body.
    public func finish() {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            state.finished = true
            return takeWake(&state)
        }
        wake?()
    }

    /// Whether ``finish()`` was called.
    public var isFinished: Bool { state.withLock { $0.finished } }

    /// Ends the stream, from either side: the transfer finished or failed (a waiting writer is
    /// told), or the producer cannot complete the body (the transfer fails rather than send a
    /// short one).
    public func abort() {
        let (writer, wake) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, (@Sendable () -> Void)?) in
            state.aborted = true
            let wake = takeWake(&state)
            state.wake = nil
            defer { state.writer = nil }
            return (state.writer, wake)
        }
        writer?.resume(returning: false)
        wake?()
    }

    /// Sets what wakes the paused consumer (the loop's resume command).
    func attach(wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// What the consumer got.
    enum Read {
        case bytes(Int)
        case end
        case pause
        case abort
    }

    /// Copies queued bytes into `buffer` (the loop's read callback).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Read {
        let (result, writer) = state.withLock { state -> (Read, CheckedContinuation<Bool, Never>?) in
            if state.aborted { return (.abort, nil) }
            let count = min(buffer.count, state.queued)
            guard count > 0 else {
                if state.finished { return (.end, nil) }
                state.consumerPaused = true
                return (.pause, nil)
            }
            state.queue.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[state.offset..<(state.offset + count)]))
            }
            state.offset += count
            if state.offset > 256 << 10 {
                state.queue.removeFirst(state.offset)
                state.offset = 0
            }
            var writer: CheckedContinuation<Bool, Never>?
            if state.queued < capacity {
                writer = state.writer
                state.writer = nil
            }
            return (.bytes(count), writer)
        }
        writer?.resume(returning: true)
        return result
    }

    private func takeWake(_ state: inout State) -> (@Sendable () -> Void)? {
        guard state.consumerPaused else { return nil }
        state.consumerPaused = false
        return state.wake
    }
}
