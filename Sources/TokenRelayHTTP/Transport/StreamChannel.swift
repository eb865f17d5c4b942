import Synchronization

/// The bounded hand-over between a stream's transfer (the loop thread, producer) and its
/// consumer (any task).
///
/// The producer offers each chunk libcurl delivers. When the buffer already holds data and the
/// chunk would take it past `capacity`, the offer is refused and the transfer is paused (libcurl
/// keeps the chunk and delivers it again after `curl_easy_pause(CONT)`), so at most
/// `capacity` plus one chunk is ever buffered and no byte is dropped. The consumer asks for a
/// resume once it has drained the buffer to half the capacity.
final class StreamChannel: Sendable {
    /// What the producer should do with an offered chunk.
    enum Offer {
        /// Taken (buffered or handed to a waiting consumer).
        case taken
        /// Refused: pause the transfer; the chunk comes again on resume.
        case pause
        /// The consumer is gone: abort the transfer.
        case abort
    }

    /// What the consumer gets on one read.
    enum Read {
        case chunk([UInt8], resume: Bool)
        case end
        case failure(any Error)
        case wait
    }

    private struct State {
        var chunks: [[UInt8]] = []
        var readIndex = 0
        var bufferedBytes = 0
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
        /// Set once when the transfer ends (or the consumer cancels).
        var end: Result<Void, any Error>?
        /// Whether the error in `end` was already thrown to the consumer.
        var endDelivered = false
        var paused = false
        var resumeRequested = false
        /// Observations for tests: the most bytes ever buffered, how often the transfer paused.
        var maxBufferedBytes = 0
        var pauses = 0
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Bytes buffered before the transfer is paused.
    let capacity: Int
    /// Guarded by the mutex; no continuation is resumed while holding it.
    private let state = Mutex(State())

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
    }

    // MARK: Producer (loop thread)

    /// Offers one chunk received from the network.
    func offer(_ bytes: UnsafeRawBufferPointer) -> Offer {
        let count = bytes.count
        let chunk = Array(bytes.bindMemory(to: UInt8.self))
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
        let decision: (Offer, CheckedContinuation<[UInt8]?, any Error>?) = state.withLock { s in
            if s.end != nil { return (.abort, nil) }
            if let waiter = s.waiter {
                s.waiter = nil
                return (.taken, waiter)
            }
            if s.bufferedBytes > 0, s.bufferedBytes + count > capacity {
                s.paused = true
                s.pauses += 1
                swap(&pauseWaiters, &s.pauseWaiters)
                return (.pause, nil)
            }
            s.chunks.append(chunk)
            s.bufferedBytes += count
            s.maxBufferedBytes = max(s.maxBufferedBytes, s.bufferedBytes)
            return (.taken, nil)
        }
        decision.1?.resume(returning: chunk)
        for waiter in pauseWaiters { waiter.resume() }
        return decision.0
    }

    /// Whether the producer paused the transfer and no resume was requested yet (idle clock stopped).
    var isPaused: Bool { state.withLock { $0.paused } }

    /// The loop is about to resume the transfer.
    func markResumed() {
        state.withLock { s in
            s.paused = false
            s.resumeRequested = false
        }
    }

    /// The transfer ended with `result`; wakes a waiting consumer.
    func finish(_ result: Result<Void, any Error>) {
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
        defer { for waiter in pauseWaiters { waiter.resume() } }
        let waiter: CheckedContinuation<[UInt8]?, any Error>? = state.withLock { s in
            swap(&pauseWaiters, &s.pauseWaiters)
            if s.end == nil { s.end = result }
            guard s.readIndex == s.chunks.count else { return nil }
            let waiter = s.waiter
            s.waiter = nil
            if waiter != nil { s.endDelivered = true }
            return waiter
        }
        guard let waiter else { return }
        switch result {
        case .success: waiter.resume(returning: nil)
        case .failure(let error): waiter.resume(throwing: error)
        }
    }

    // MARK: Observation (tests)

    /// The most bytes the channel ever held, and how many times it paused the transfer.
    var statistics: (maxBufferedBytes: Int, pauses: Int) {
        state.withLock { ($0.maxBufferedBytes, $0.pauses) }
    }

    /// Returns once the transfer has been paused (at once if it is paused now).
    func waitUntilPaused() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.paused { return true }
                s.pauseWaiters.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    // MARK: Consumer

    /// Takes the next chunk, the end, or registers nothing and says `.wait`.
    func read() -> Read {
        state.withLock { s in Self.take(&s, capacity: capacity) }
    }

    /// Like ``read()`` but when nothing is available installs `waiter` to be resumed by the producer.
    func readOrWait(_ waiter: CheckedContinuation<[UInt8]?, any Error>) -> Read {
        state.withLock { s in
            let read = Self.take(&s, capacity: capacity)
            if case .wait = read { s.waiter = waiter }
            return read
        }
    }

    /// The consumer stopped: ends the channel with `error` and returns a waiter to fail.
    func cancelConsumer(with error: any Error) -> CheckedContinuation<[UInt8]?, any Error>? {
        state.withLock { s in
            if s.end == nil { s.end = .failure(error) }
            s.chunks.removeAll()
            s.readIndex = 0
            s.bufferedBytes = 0
            let waiter = s.waiter
            s.waiter = nil
            if waiter != nil { s.endDelivered = true }
            return waiter
        }
    }

    private static func take(_ s: inout State, capacity: Int) -> Read {
        if s.readIndex < s.chunks.count {
            let chunk = s.chunks[s.readIndex]
            s.chunks[s.readIndex] = []
            s.readIndex += 1
            if s.readIndex == s.chunks.count {
                s.chunks.removeAll(keepingCapacity: true)
                s.readIndex = 0
            }
            s.bufferedBytes -= chunk.count
            var resume = false
            if s.paused, !s.resumeRequested, s.bufferedBytes <= capacity / 2 {
                s.resumeRequested = true
                resume = true
            }
            return .chunk(chunk, resume: resume)
        }
        guard let end = s.end else { return .wait }
        if s.endDelivered { return .end }
        s.endDelivered = true
        switch end {
        case .success: return .end
        case .failure(let error): return .failure(error)
        }
    }
}
