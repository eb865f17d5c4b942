import Dispatch
import FoundationEssentials
import Synchronization

/// The one writer of log lines to a file descriptor (stderr), with a bounded queue, so a parent
/// that reads stderr slowly, or not at all, never blocks a thread that logs (the stdin reader
/// among them). When nothing is queued or being written, the thread that logs writes its line
/// itself as far as that cannot block (``OutputFile/writeWithoutBlocking(_:_:kind:)``: a pipe, a
/// socket, a regular file); the rest, and every line while a write is under way, is queued for a
/// thread of its own, started on first need (a start that logs a warning creates no thread for
/// it). Past `bound` queued bytes a line is dropped and counted — a log line is the one output
/// that may be lost — and once the queue has drained, a line saying how many were dropped is
/// written.
public final class LogWriter: Sendable {
    /// The default bound: 1 MiB of queued log lines.
    public static let defaultBound = 1 << 20

    private struct State {
        var queue: [[UInt8]] = []
        /// Bytes queued or being written.
        var queuedBytes = 0
        /// Lines dropped since the last notice.
        var dropped = 0
        /// A writer (the thread, or a thread that logs writing inline) owns the output.
        var busy = false
        var threadStarted = false
        var writerSleeping = false
        /// Lines may be written inline: the output takes non-blocking writes, and the kernel has
        /// not refused one.
        var inlineWrites: Bool
        var flushWaiters: [DispatchSemaphore] = []

        var isDrained: Bool { queuedBytes == 0 && dropped == 0 }

        /// What gets the queue written when no writer owns the output.
        mutating func wakeAction() -> Action {
            guard !busy else { return .none }
            if !threadStarted {
                threadStarted = true
                return .start
            }
            if writerSleeping {
                writerSleeping = false
                return .wake
            }
            return .none
        }

        /// The flush waiters to let go, when nothing is left to write.
        mutating func drainedWaiters() -> [DispatchSemaphore] {
            guard isDrained, !busy else { return [] }
            defer { flushWaiters = [] }
            return flushWaiters
        }
    }

    private enum Action {
        case none
        case writeInline
        case wake
        case start
    }

    private let fileDescriptor: Int32
    private let output: OutputFile.Kind
    private let bound: Int
    /// Renders the "N log lines dropped" line in the logger's format.
    private let dropNotice: @Sendable (Int) -> [UInt8]
    /// Guarded by the mutex: the queue, the drop counter, the waiters.
    private let state: Mutex<State>
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)

    init(fileDescriptor: Int32, bound: Int = LogWriter.defaultBound, dropNotice: @escaping @Sendable (Int) -> [UInt8]) {
        self.fileDescriptor = fileDescriptor
        self.bound = bound
        self.dropNotice = dropNotice
        let output = OutputFile.Kind(fileDescriptor)
        self.output = output
        state = Mutex(State(inlineWrites: output.takesWritesWithoutBlocking))
    }

    /// Writes one line inline or queues it; never blocks. Drops it (and counts it) when the queue
    /// is full.
    func enqueue(_ line: [UInt8]) {
        let action: Action = state.withLock { state in
            guard state.queuedBytes + line.count <= bound || state.queuedBytes == 0 else {
                state.dropped += 1
                return .none
            }
            state.queuedBytes += line.count
            if !state.busy, state.queue.isEmpty, state.dropped == 0, state.inlineWrites {
                state.busy = true
                return .writeInline
            }
            state.queue.append(line)
            return state.wakeAction()
        }
        switch action {
        case .none: break
        case .writeInline: writeInline(line)
        case .wake, .start: perform(action)
        }
    }

    /// Writes what of `line` can go without blocking; queues the rest first in line and lets the
    /// thread take over whatever is queued. Only by the writer that owns the output.
    private func writeInline(_ line: [UInt8]) {
        let done: Int
        var inlineWrites = true
        switch OutputFile.writeWithoutBlocking(fileDescriptor, line, kind: output) {
        case .written(let count): done = count
        case .unsupported(let count):
            done = count
            inlineWrites = false
        case .failed: done = line.count  // stderr is gone: the line is lost, as the thread would lose it
        }
        let (action, waiters): (Action, [DispatchSemaphore]) = state.withLock { state in
            state.busy = false
            state.queuedBytes -= done
            if !inlineWrites { state.inlineWrites = false }
            if done < line.count { state.queue.insert(Array(line[done...]), at: 0) }
            if !state.queue.isEmpty || state.dropped > 0 { return (state.wakeAction(), []) }
            return (.none, state.drainedWaiters())
        }
        perform(action)
        for waiter in waiters { waiter.signal() }
    }

    private func perform(_ action: Action) {
        switch action {
        case .wake: wakeup.signal()
        case .start:
            if !SystemThread.start(named: "relay-stderr", { [self] in run() }) {
                state.withLock { $0.threadStarted = false }  // the next line tries again
            }
        case .none, .writeInline: break
        }
    }

    /// Waits until every queued line is written, at most `timeout` (stderr may never be read);
    /// whether they were.
    @discardableResult
    func flush(timeout: DispatchTimeInterval) -> Bool {
        let semaphore = DispatchSemaphore(value: 0)
        let drained = state.withLock { state in
            if state.isDrained { return true }
            state.flushWaiters.append(semaphore)
            return false
        }
        return drained || semaphore.wait(timeout: .now() + timeout) == .success
    }

    private func run() {
        while true {
            let next: (lines: [[UInt8]], dropped: Int)? = state.withLock { state in
                if !state.busy, !state.queue.isEmpty {
                    state.busy = true
                    defer { state.queue = [] }
                    return (state.queue, 0)
                }
                if !state.busy, state.dropped > 0 {
                    state.busy = true
                    defer { state.dropped = 0 }
                    return ([], state.dropped)
                }
                state.writerSleeping = true
                for waiter in state.drainedWaiters() { waiter.signal() }
                return nil
            }
            guard let next else {
                wakeup.wait()
                continue
            }
            if next.dropped > 0 {
                OutputFile.writeAll(fileDescriptor, dropNotice(next.dropped))
                state.withLock { $0.busy = false }
                continue
            }
            var chunk: [UInt8] = []
            for line in next.lines { chunk.append(contentsOf: line) }
            OutputFile.writeAll(fileDescriptor, chunk)
            state.withLock { state in
                state.queuedBytes -= chunk.count
                state.busy = false
            }
        }
    }
}
