import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayLogging

/// The one serial writer of protocol frames. Whole frames are written in the order they were
/// handed over, one writer at a time, so frames never interleave, and no producer ever blocks on
/// a slow peer: when nothing is queued or being written, the producer writes the frame itself
/// (no thread hand-off for a lone answer) as far as that cannot block: into a pipe or a socket,
/// one non-blocking write of what fits; into a regular file, all of it. Whatever is left (all of
/// it for a terminal) is queued, first in line, for a dedicated thread doing blocking `write(2)`
/// calls, started on first need.
///
/// One bound holds for every frame, whoever produced it (SPEC §7 "Concurrency limits"): while
/// `bound` bytes or more wait to be written, ``send(_:)`` suspends its caller and
/// ``hasRoom(orWhenRoom:)`` holds the stdin reader back before its next read, until the peer has
/// read enough to bring the queue below the bound. ``sendNow(_:)`` never waits and never drops:
/// it is for the stdin reader, whose own replies are bounded by its pausing before each read.
/// `EPIPE` (the peer closed its end) drops all output and reports the peer as gone.
public final class StdioWriter: MessageSink {
    /// The default bound: 32 MiB of frames waiting to be written.
    public static let defaultBound = 32 << 20

    private struct State {
        var queue: [[UInt8]] = []
        /// Bytes handed over and not yet written (queued or in the writer thread's hands).
        var queuedBytes = 0
        var writerSleeping = false
        /// A writer (the thread, or a producer writing inline) owns the output until it clears this.
        var busy = false
        /// The writer thread has been started.
        var threadStarted = false
        var closed = false
        var broken = false
        var framing: Framing = .ndjson
        var spaceWaiters: [CheckedContinuation<Void, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        /// Called once when the queue has room again (the stdin reader, held back).
        var roomWaiters: [@Sendable () -> Void] = []
        /// Producers wait in ``send(_:)`` since the queue last had room (logged once per episode).
        var producersWaiting = false
        /// Producers may write inline: the output is a pipe, a socket or a regular file, and the
        /// kernel has not refused a non-blocking write to it.
        var inlineWrites: Bool

        var hasRoom: Bool { broken || closed || queuedBytes < bound }
        var isDrained: Bool { broken || (queue.isEmpty && queuedBytes == 0) }
        let bound: Int
    }

    private let fileDescriptor: Int32
    /// What the output is, which decides whether a producer may write inline.
    private let output: OutputFile.Kind
    private let onPeerGone: @Sendable () -> Void
    /// Guarded by the mutex: the queue, its byte count, the waiters and the writer thread's
    /// sleep flag.
    private let state: Mutex<State>
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)

    /// A writer of frames to `fileDescriptor` (a dup of the real stdout in the server).
    public init(
        fileDescriptor: Int32, bound: Int = StdioWriter.defaultBound, onPeerGone: @escaping @Sendable () -> Void = {}
    ) {
        self.fileDescriptor = fileDescriptor
        self.onPeerGone = onPeerGone
        let output = OutputFile.Kind(fileDescriptor)
        self.output = output
        state = Mutex(State(inlineWrites: output.takesWritesWithoutBlocking, bound: max(1, bound)))
    }

    /// Writes as much of `frame` as can go without blocking, accounts for it, and returns how
    /// many bytes are done with (all of them when the peer is gone). Called only by the one
    /// writer that owns the output, with nothing queued before `frame`.
    private func writeInline(_ frame: [UInt8]) -> Int {
        switch OutputFile.writeWithoutBlocking(fileDescriptor, frame, kind: output) {
        case .written(let count):
            account(count, ok: true)
            return count
        case .unsupported(let count):
            // The thread writes from now on.
            state.withLock { $0.inlineWrites = false }
            account(count, ok: true)
            return count
        case .failed:
            account(frame.count, ok: false)
            return frame.count
        }
    }

    /// The framing replies use (the peer's, once detected).
    public var framing: Framing {
        get { state.withLock { $0.framing } }
        set { state.withLock { $0.framing = newValue } }
    }

    public func send(_ message: consuming [UInt8]) async {
        guard enqueue(message) else { return }
        let (firstToWait, queued) = state.withLock { state in
            defer { state.producersWaiting = true }
            return (!state.producersWaiting, state.queuedBytes)
        }
        if firstToWait { log.debug("stdout backed up: replies wait for the peer", [("queuedBytes", String(queued))]) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow: Bool = state.withLock { state in
                if state.hasRoom { return true }
                state.spaceWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    public func sendNow(_ message: consuming [UInt8]) {
        _ = enqueue(message)
    }

    /// Whether the queue is below the bound (or the peer is gone). When it is not, `resume` is
    /// called once, from the thread whose write brings it below: the stdin reader's way of
    /// pausing before its next read without blocking whoever reads it.
    public func hasRoom(orWhenRoom resume: @escaping @Sendable () -> Void) -> Bool {
        let pausedAt: Int? = state.withLock { state in
            if state.hasRoom { return nil }
            state.roomWaiters.append(resume)
            return state.queuedBytes
        }
        guard let pausedAt else { return true }
        log.debug("stdout backed up: stdin paused", [("queuedBytes", String(pausedAt))])
        return false
    }

    /// Writes a frame inline or queues it; returns whether the caller should wait for room.
    private func enqueue(_ message: consuming [UInt8]) -> Bool {
        enum Action { case none, writeInline, wake, startThread }
        // Framed outside the lock, in place for NDJSON (the framing changes only once, when
        // detected, before the first reply).
        let frame = state.withLock { $0.framing }.frame(message)
        let (action, full): (Action, Bool) = state.withLock { state in
            guard !state.broken, !state.closed else { return (.none, false) }
            state.queuedBytes += frame.count
            if !state.busy, state.queue.isEmpty, state.inlineWrites {
                state.busy = true
                return (.writeInline, !state.hasRoom)
            }
            state.queue.append(Framing.exactlySized(frame))
            return (wakeAction(&state), !state.hasRoom)
        }
        switch action {
        case .none: break
        case .writeInline:
            let done = writeInline(frame)
            let wake: Action = state.withLock { state in
                state.busy = false
                if done < frame.count { state.queue.insert(Framing.exactlySized(frame, from: done), at: 0) }
                return !state.broken && !state.queue.isEmpty ? wakeAction(&state) : .none
            }
            perform(wake)
        case .wake, .startThread: perform(action)
        }
        return full

        /// What gets the queue written when no writer owns the output. Under the lock.
        func wakeAction(_ state: inout State) -> Action {
            guard !state.busy else { return .none }
            if !state.threadStarted {
                state.threadStarted = true
                return .startThread
            }
            if state.writerSleeping {
                state.writerSleeping = false
                return .wake
            }
            return .none
        }
        func perform(_ action: Action) {
            switch action {
            case .wake: wakeup.signal()
            case .startThread:
                if !SystemThread.start(named: "relay-stdout", { [self] in run() }) {
                    state.withLock { $0.threadStarted = false }  // the next frame tries again
                }
            case .none, .writeInline: break
            }
        }
    }

    /// Waits until everything handed over so far has been written (or the peer is gone).
    public func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done: Bool = state.withLock { state in
                if state.isDrained { return true }
                state.drainWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Whether the peer has gone away (EPIPE).
    public var isBroken: Bool { state.withLock { $0.broken } }

    private func run() {
        while true {
            // Bound straight to `var` (no second reference), so that releasing a frame below
            // frees it instead of copying the batch.
            guard
                var batch: [[UInt8]] = state.withLock({ state in
                    if state.queue.isEmpty || state.busy {
                        state.writerSleeping = true
                        return nil
                    }
                    state.busy = true
                    defer { state.queue = [] }
                    return state.queue
                })
            else {
                wakeup.wait()
                continue
            }
            // Coalesce small frames into one write; large ones go out on their own. Each write
            // is accounted for as soon as it is done, so waiters resume as the peer reads, and
            // each frame is released once copied or written, so the memory held follows the
            // count.
            var pending: [UInt8] = []
            pending.reserveCapacity(256 << 10)
            for index in batch.indices {
                let frame = batch[index]
                batch[index] = []
                if pending.count + frame.count > 256 << 10, !pending.isEmpty {
                    if !write(pending) { return }
                    pending.removeAll(keepingCapacity: true)
                }
                if frame.count > 256 << 10 {
                    if !write(frame) { return }
                } else {
                    pending.append(contentsOf: frame)
                }
            }
            if !pending.isEmpty, !write(pending) { return }
            state.withLock { $0.busy = false }
        }
    }

    /// Writes `bytes` and accounts for them; false once the peer is gone (the thread ends).
    private func write(_ bytes: [UInt8]) -> Bool {
        let ok = !isBroken && OutputFile.writeAll(fileDescriptor, bytes)
        account(bytes.count, ok: ok)
        return ok
    }

    /// Takes `count` written bytes off the queue's count and lets waiters go as room or the end
    /// of the queue is reached; `ok == false`: the peer is gone, all output is dropped.
    private func account(_ count: Int, ok: Bool) {
        let (spaceWaiters, drainWaiters, roomWaiters, peerGone):
            ([CheckedContinuation<Void, Never>], [CheckedContinuation<Void, Never>], [@Sendable () -> Void], Bool) =
                state.withLock { state in
                    state.queuedBytes -= count
                    var peerGone = false
                    if !ok && !state.broken {
                        state.broken = true
                        state.queue = []
                        state.queuedBytes = 0
                        peerGone = true
                    }
                    var space: [CheckedContinuation<Void, Never>] = []
                    var room: [@Sendable () -> Void] = []
                    if state.hasRoom {
                        space = state.spaceWaiters
                        state.spaceWaiters = []
                        room = state.roomWaiters
                        state.roomWaiters = []
                        state.producersWaiting = false
                    }
                    var drained: [CheckedContinuation<Void, Never>] = []
                    if state.isDrained {
                        drained = state.drainWaiters
                        state.drainWaiters = []
                    }
                    return (space, drained, room, peerGone)
                }
        if !roomWaiters.isEmpty {
            log.debug("stdout drained below the bound: stdin resumed")
            for resume in roomWaiters { resume() }
        }
        for waiter in spaceWaiters { waiter.resume() }
        for waiter in drainWaiters { waiter.resume() }
        if peerGone {
            log.debug("stdout closed by the peer")
            onPeerGone()
        }
    }
}
