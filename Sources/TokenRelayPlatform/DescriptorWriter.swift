import Dispatch
import Synchronization

/// The one writer of a file descriptor the process writes from many threads: stdout's frames
/// (`StdioWriter`) and stderr's log lines (`LogWriter`). What is handed over is written whole, in
/// the order handed over, one writer at a time, so writes never interleave, and no producer ever
/// blocks on a slow reader: when nothing is queued or being written, the producer writes itself
/// (no thread hand-off for a lone answer) as far as that cannot block
/// (``OutputFile/writeWithoutBlocking(_:_:kind:)``: a pipe, a socket, a regular file); the rest
/// (all of it for a terminal) is queued, first in line, for a thread of its own doing blocking
/// writes, started on first need.
///
/// Past `bound` queued bytes the two outputs differ, and that is the writer's one policy
/// (``Overflow``): frames are never lost, so a producer learns the queue is full and waits for
/// room (``whenRoom(_:)``); a log line may be, so it is dropped and counted, and once the queue
/// has drained a line saying how many were dropped is written.
///
/// A process that is ending cannot wait for a reader that stopped reading: ``abandon()`` gives up
/// what is still unwritten and lets every waiting producer go (the one unbounded wait the
/// ``Overflow/wait`` policy has, bounded by whoever stops the process).
public final class DescriptorWriter: Sendable {
    /// What happens to bytes handed over while `bound` bytes or more are queued.
    public enum Overflow: Sendable {
        /// Queued anyway; ``write(_:)`` says the queue is full, and the producer waits for room.
        /// A failed write means the reader is gone (`EPIPE`): all output is dropped from then on.
        case wait
        /// Dropped and counted; `notice` renders the line that says how many, written once the
        /// queue has drained. A failed write loses what it was writing, and the writer goes on.
        case drop(notice: @Sendable (Int) -> [UInt8])
    }

    private struct State {
        var queue: [[UInt8]] = []
        /// Bytes handed over and not yet written (queued or in a writer's hands).
        var queuedBytes = 0
        /// Handed over past the bound and dropped since the last notice (``Overflow/drop(notice:)``).
        var dropped = 0
        /// A writer (the thread, or a producer writing inline) owns the output until it clears this.
        var busy = false
        var threadStarted = false
        var writerSleeping = false
        /// Producers may write inline: the output takes non-blocking writes, and the kernel has
        /// not refused one.
        var inlineWrites: Bool
        /// The reader is gone (``Overflow/wait``), or what it did not read was abandoned:
        /// everything is dropped.
        var broken = false
        /// What was unwritten was given up (``abandon()``), and everything handed over since is.
        var abandoned = false
        /// Bytes given up (``abandon()``): unwritten then, or handed over since.
        var abandonedBytes = 0
        var roomWaiters: [@Sendable () -> Void] = []
        var drainWaiters: [@Sendable () -> Void] = []
        let bound: Int

        var hasRoom: Bool { broken || queuedBytes < bound }
        var isDrained: Bool { broken || (queuedBytes == 0 && dropped == 0 && !busy) }

        /// What gets the queue written when no writer owns the output.
        mutating func wakeAction() -> Action {
            guard !busy, !broken else { return .none }
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

        /// The waiters to let go now.
        mutating func readyWaiters() -> [@Sendable () -> Void] {
            var ready: [@Sendable () -> Void] = []
            if hasRoom, !roomWaiters.isEmpty {
                ready = roomWaiters
                roomWaiters = []
            }
            if isDrained, !drainWaiters.isEmpty {
                ready += drainWaiters
                drainWaiters = []
            }
            return ready
        }
    }

    private enum Action {
        case none, wake, start
    }

    /// Largest run of queued writes the thread joins into one `write(2)`.
    private static let coalescedBytes = 256 << 10

    private let fileDescriptor: Int32
    private let output: OutputFile.Kind
    private let overflow: Overflow
    private let threadName: String
    private let onBroken: @Sendable () -> Void
    /// Guarded by the mutex: the queue, its byte count, the waiters and the thread's sleep flag.
    private let state: Mutex<State>
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)

    /// A writer of `fileDescriptor`; its thread (when one is needed) is named `threadName`;
    /// `onBroken` is called once when the reader is gone (``Overflow/wait`` only).
    public init(
        fileDescriptor: Int32, bound: Int, overflow: Overflow, threadName: String,
        onBroken: @escaping @Sendable () -> Void = {}
    ) {
        self.fileDescriptor = fileDescriptor
        self.overflow = overflow
        self.threadName = threadName
        self.onBroken = onBroken
        let output = OutputFile.Kind(fileDescriptor)
        self.output = output
        state = Mutex(State(inlineWrites: output.takesWritesWithoutBlocking, bound: max(1, bound)))
    }

    /// Writes `bytes` inline or queues them; never blocks. Returns whether the queue is at or over
    /// the bound afterwards (with ``Overflow/wait``, the producer should wait for room).
    @discardableResult
    public func write(_ bytes: consuming [UInt8]) -> Bool {
        let bytes = bytes
        enum Step { case none, inline, wake(Action) }
        let (step, full): (Step, Bool) = state.withLock { state in
            guard !state.broken else {
                if state.abandoned { state.abandonedBytes += bytes.count }
                return (.none, false)
            }
            if case .drop = overflow, state.queuedBytes + bytes.count > state.bound, state.queuedBytes > 0 {
                state.dropped += 1
                return (.none, true)
            }
            state.queuedBytes += bytes.count
            if !state.busy, state.queue.isEmpty, state.dropped == 0, state.inlineWrites {
                state.busy = true
                return (.inline, !state.hasRoom)
            }
            state.queue.append(Self.exactlySized(bytes))
            return (.wake(state.wakeAction()), !state.hasRoom)
        }
        switch step {
        case .none: break
        case .inline: writeInline(bytes)
        case .wake(let action): perform(action)
        }
        return full
    }

    /// Whether the queue is below the bound (or the reader is gone). When it is not, `resume` is
    /// called once, from the thread whose write brings it below.
    public func whenRoom(_ resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            if state.hasRoom { return true }
            state.roomWaiters.append(resume)
            return false
        }
    }

    /// Whether everything handed over so far is written (or the reader is gone). When it is not,
    /// `resume` is called once, from the thread that writes the last of it.
    public func whenDrained(_ resume: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            if state.isDrained { return true }
            state.drainWaiters.append(resume)
            return false
        }
    }

    /// Waits until everything handed over so far is written, at most `timeout` (the reader may
    /// never read); whether it was.
    public func drain(timeout: DispatchTimeInterval) -> Bool {
        let drained = DispatchSemaphore(value: 0)
        return whenDrained { drained.signal() } || drained.wait(timeout: .now() + timeout) == .success
    }

    /// Gives up what is not written yet, for a process that is ending and will not wait any
    /// longer for a reader that stopped reading: the queue is dropped, every producer waiting for
    /// room and every wait for the drain is let go, and whatever is handed over from now on is
    /// dropped too; all of it is counted (``abandonedBytes``). A write in progress is given up
    /// with the rest (the thread blocked in it stays so until the process ends; a frame may be cut
    /// short). Does nothing once the reader is gone.
    public func abandon() {
        let (ready, wake): ([@Sendable () -> Void], Bool) = state.withLock { state in
            guard !state.broken else { return ([], false) }
            state.broken = true
            state.abandoned = true
            state.abandonedBytes += state.queuedBytes
            state.queue = []
            state.queuedBytes = 0
            state.dropped = 0
            defer { state.writerSleeping = false }
            return (state.readyWaiters(), state.writerSleeping)
        }
        if wake { wakeup.signal() }  // the thread sees the writer broken and ends
        for resume in ready { resume() }
    }

    /// Bytes given up by ``abandon()``: unwritten then, or handed over since.
    public var abandonedBytes: Int { state.withLock { $0.abandonedBytes } }

    /// Whether the reader has gone away (``Overflow/wait``: a write failed), or what it did not
    /// read was abandoned.
    public var isBroken: Bool { state.withLock { $0.broken } }

    /// Bytes handed over and not yet written.
    public var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// Writes what of `bytes` can go without blocking and queues the rest first in line for the
    /// thread. Only by the producer that owns the output (`busy`), with nothing queued before.
    private func writeInline(_ bytes: [UInt8]) {
        var done: Int
        var ok = true
        var inlineWrites = true
        switch OutputFile.writeWithoutBlocking(fileDescriptor, bytes, kind: output) {
        case .written(let count): done = count
        case .unsupported(let count):
            done = count
            inlineWrites = false  // the thread writes from now on
        case .failed:
            done = bytes.count
            ok = false
        }
        let (action, ready, broke): (Action, [@Sendable () -> Void], Bool) = state.withLock { state in
            state.busy = false
            if !inlineWrites { state.inlineWrites = false }
            let broke = account(done, ok: ok, &state)
            if done < bytes.count, !state.broken { state.queue.insert(Self.exactlySized(bytes, from: done), at: 0) }
            let action = state.queue.isEmpty && state.dropped == 0 ? Action.none : state.wakeAction()
            return (action, state.readyWaiters(), broke)
        }
        perform(action)
        finish(ready, broke: broke)
    }

    /// Takes `count` written bytes off the queue's count; a failed write with ``Overflow/wait``
    /// means the reader is gone: everything is dropped. Returns whether the writer broke now.
    private func account(_ count: Int, ok: Bool, _ state: inout State) -> Bool {
        guard !state.broken else { return false }  // abandoned meanwhile: nothing is counted any more
        state.queuedBytes -= count
        guard !ok, case .wait = overflow, !state.broken else { return false }
        state.broken = true
        state.queue = []
        state.queuedBytes = 0
        return true
    }

    private func finish(_ ready: [@Sendable () -> Void], broke: Bool) {
        for resume in ready { resume() }
        if broke { onBroken() }
    }

    private func perform(_ action: Action) {
        switch action {
        case .wake: wakeup.signal()
        case .start:
            if !SystemThread.start(named: threadName, { [self] in run() }) {
                state.withLock { $0.threadStarted = false }  // the next write tries again
            }
        case .none: break
        }
    }

    private func run() {
        // The batch is moved out of the queue into this one variable (no second reference), so
        // that releasing a buffer once written frees it instead of copying the batch.
        var batch: [[UInt8]] = []
        while true {
            enum Work {
                case write
                case notice(Int)
                case sleep
                case stop
            }
            let work: Work = state.withLock { state in
                if state.broken { return .stop }
                if !state.busy, !state.queue.isEmpty {
                    state.busy = true
                    swap(&batch, &state.queue)
                    return .write
                }
                if !state.busy, state.dropped > 0 {
                    state.busy = true
                    defer { state.dropped = 0 }
                    return .notice(state.dropped)
                }
                state.writerSleeping = true
                return .sleep
            }
            switch work {
            case .stop:
                return
            case .sleep:
                wakeup.wait()
                continue
            case .notice(let count):
                if case .drop(let notice) = overflow { OutputFile.writeAll(fileDescriptor, notice(count)) }
            case .write:
                writeFromThread(&batch)
                batch.removeAll()
            }
            let ready = state.withLock { state in
                state.busy = false
                return state.readyWaiters()
            }
            finish(ready, broke: false)
        }
    }

    /// Writes a batch from the thread: small buffers joined into one `write(2)`, large ones on
    /// their own. Each write is accounted for as soon as it is done, so waiters resume as the
    /// reader reads, and each buffer is released once copied or written, so the memory held
    /// follows the count. Stops when the reader is gone.
    private func writeFromThread(_ batch: inout [[UInt8]]) {
        var pending: [UInt8] = []
        pending.reserveCapacity(Self.coalescedBytes)
        for index in batch.indices {
            let bytes = batch[index]
            batch[index] = []
            if pending.count + bytes.count > Self.coalescedBytes, !pending.isEmpty {
                guard writeAndAccount(pending) else { return }
                pending.removeAll(keepingCapacity: true)
            }
            if bytes.count > Self.coalescedBytes {
                guard writeAndAccount(bytes) else { return }
            } else {
                pending.append(contentsOf: bytes)
            }
        }
        if !pending.isEmpty { writeAndAccount(pending) }
    }

    /// Writes `bytes` and accounts for them; false once the reader is gone.
    @discardableResult
    private func writeAndAccount(_ bytes: [UInt8]) -> Bool {
        let ok = OutputFile.writeAll(fileDescriptor, bytes)
        let (ready, broke, broken): ([@Sendable () -> Void], Bool, Bool) = state.withLock { state in
            if state.broken { return ([], false, true) }
            let broke = account(bytes.count, ok: ok, &state)
            return (state.readyWaiters(), broke, state.broken)
        }
        finish(ready, broke: broke)
        return !broken
    }

    /// `bytes` from `start` on, in storage of their own size, for bytes that wait in the queue:
    /// the queue is bounded by its byte count, and a serialized body can carry up to as much spare
    /// capacity again. A whole buffer without much spare room is kept.
    static func exactlySized(_ bytes: [UInt8], from start: Int = 0) -> [UInt8] {
        let count = bytes.count - start
        if start == 0, bytes.capacity - count <= count / 8 { return bytes }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = buffer.initialize(fromContentsOf: bytes[start...])
        }
    }
}
