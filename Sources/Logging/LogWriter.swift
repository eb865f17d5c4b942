import Dispatch
import FoundationEssentials
import Synchronization

/// The one writer of log lines to a file descriptor (stderr): a thread of its own with a
/// bounded queue, so a parent that reads stderr slowly, or not at all, never blocks a thread
/// that logs (the stdin reader among them). Past `bound` queued bytes a line is dropped and
/// counted — a log line is the one output that may be lost — and once the queue has drained,
/// a line saying how many were dropped is written.
public final class LogWriter: Sendable {
    /// The default bound: 1 MiB of queued log lines.
    public static let defaultBound = 1 << 20

    private struct State {
        var queue: [[UInt8]] = []
        /// Bytes queued or being written.
        var queuedBytes = 0
        /// Lines dropped since the last notice.
        var dropped = 0
        var threadStarted = false
        var writerSleeping = false
        var flushWaiters: [DispatchSemaphore] = []
    }

    private let fileDescriptor: Int32
    private let bound: Int
    /// Renders the "N log lines dropped" line in the logger's format.
    private let dropNotice: @Sendable (Int) -> [UInt8]
    /// Guarded by the mutex: the queue, the drop counter, the waiters.
    private let state = Mutex(State())
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)

    init(fileDescriptor: Int32, bound: Int = LogWriter.defaultBound, dropNotice: @escaping @Sendable (Int) -> [UInt8]) {
        self.fileDescriptor = fileDescriptor
        self.bound = bound
        self.dropNotice = dropNotice
    }

    /// Queues one line; never blocks. Drops it (and counts it) when the queue is full.
    func enqueue(_ line: [UInt8]) {
        enum Action {
            case none
            case wake
            case start
        }
        let action: Action = state.withLock { state in
            guard state.queuedBytes + line.count <= bound || state.queuedBytes == 0 else {
                state.dropped += 1
                return .none
            }
            state.queue.append(line)
            state.queuedBytes += line.count
            if !state.threadStarted {
                state.threadStarted = true
                return .start
            }
            if state.writerSleeping {
                state.writerSleeping = false
                return .wake
            }
            return .none
        }
        switch action {
        case .none: break
        case .wake: wakeup.signal()
        case .start:
            if !SystemThread.start(named: "relay-stderr", { [self] in run() }) {
                state.withLock { $0.threadStarted = false }  // the next line tries again
            }
        }
    }

    /// Waits until every queued line is written, at most `timeout` (stderr may never be read).
    func flush(timeout: DispatchTimeInterval) {
        let semaphore = DispatchSemaphore(value: 0)
        let drained = state.withLock { state in
            if state.queuedBytes == 0 && state.dropped == 0 { return true }
            state.flushWaiters.append(semaphore)
            return false
        }
        if !drained { _ = semaphore.wait(timeout: .now() + timeout) }
    }

    private func run() {
        while true {
            let next: (lines: [[UInt8]], dropped: Int)? = state.withLock { state in
                if !state.queue.isEmpty {
                    defer { state.queue = [] }
                    return (state.queue, 0)
                }
                if state.dropped > 0 {
                    defer { state.dropped = 0 }
                    return ([], state.dropped)
                }
                state.writerSleeping = true
                let waiters = state.flushWaiters
                state.flushWaiters = []
                for waiter in waiters { waiter.signal() }
                return nil
            }
            guard let next else {
                wakeup.wait()
                continue
            }
            if next.dropped > 0 {
                OutputFile.writeAll(fileDescriptor, dropNotice(next.dropped))
                continue
            }
            var chunk: [UInt8] = []
            for line in next.lines { chunk.append(contentsOf: line) }
            OutputFile.writeAll(fileDescriptor, chunk)
            state.withLock { $0.queuedBytes -= chunk.count }
        }
    }
}
