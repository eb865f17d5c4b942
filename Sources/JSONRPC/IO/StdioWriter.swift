import Dispatch
import Foundation
import Logging
import Synchronization

/// The one serial writer of protocol frames. Whole frames are written in the order they were
/// handed over, by a dedicated thread doing blocking `write(2)` calls, so frames never
/// interleave and no cooperative-pool thread ever blocks on a slow peer.
///
/// One bound holds for every frame, whoever produced it (SPEC §7 "Concurrency limits"): while
/// `bound` bytes or more wait to be written, ``send(_:)`` suspends its caller and
/// ``waitForRoom()`` blocks the stdin reader before its next read, until the peer has read
/// enough to bring the queue below the bound. ``sendNow(_:)`` never waits and never drops: it
/// is for the reader thread, whose own replies are bounded by its pausing before each read.
/// `EPIPE` (the peer closed its end) drops all output and reports the peer as gone.
public final class StdioWriter: MessageSink {
    /// The default bound: 32 MiB of frames waiting to be written.
    public static let defaultBound = 32 << 20

    private struct State {
        var queue: [[UInt8]] = []
        /// Bytes handed over and not yet written (queued or in the writer thread's hands).
        var queuedBytes = 0
        var writerSleeping = false
        var closed = false
        var broken = false
        var framing: Framing = .ndjson
        var spaceWaiters: [CheckedContinuation<Void, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        /// The reader thread is blocked in ``waitForRoom()``.
        var readerParked = false
        /// Producers wait in ``send(_:)`` since the queue last had room (logged once per episode).
        var producersWaiting = false

        var hasRoom: Bool { broken || closed || queuedBytes < bound }
        var isDrained: Bool { broken || (queue.isEmpty && queuedBytes == 0) }
        let bound: Int
    }

    private let fileDescriptor: Int32
    private let onPeerGone: @Sendable () -> Void
    /// Guarded by the mutex: the queue, its byte count, the waiters and the writer thread's
    /// sleep flag.
    private let state: Mutex<State>
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)
    /// Signalled once each time the parked reader thread is let go.
    private let readerWakeup = DispatchSemaphore(value: 0)

    /// Starts the writer thread on `fileDescriptor` (a dup of the real stdout in the server).
    public init(
        fileDescriptor: Int32, bound: Int = StdioWriter.defaultBound, onPeerGone: @escaping @Sendable () -> Void = {}
    ) {
        self.fileDescriptor = fileDescriptor
        self.onPeerGone = onPeerGone
        state = Mutex(State(bound: max(1, bound)))
        let thread = Thread { [self] in run() }
        thread.name = "tokenrelay-writer"
        thread.start()
    }

    /// The framing replies use (the peer's, once detected).
    public var framing: Framing {
        get { state.withLock { $0.framing } }
        set { state.withLock { $0.framing = newValue } }
    }

    public func send(_ message: [UInt8]) async {
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

    public func sendNow(_ message: [UInt8]) {
        _ = enqueue(message)
    }

    /// Blocks the calling thread (the stdin reader, never a task) while the queue is at or over
    /// the bound; returns at once when there is room or the peer is gone.
    public func waitForRoom() {
        let pausedAt: Int? = state.withLock { state in
            if state.hasRoom { return nil }
            state.readerParked = true
            return state.queuedBytes
        }
        guard let pausedAt else { return }
        log.debug("stdout backed up: stdin paused", [("queuedBytes", String(pausedAt))])
        readerWakeup.wait()
        log.debug("stdout drained below the bound: stdin resumed")
    }

    /// Queues a frame; returns whether the caller should wait for room.
    private func enqueue(_ message: [UInt8]) -> Bool {
        let (wake, full): (Bool, Bool) = state.withLock { state in
            guard !state.broken, !state.closed else { return (false, false) }
            let frame = state.framing.frame(message)
            state.queue.append(frame)
            state.queuedBytes += frame.count
            var wake = false
            if state.writerSleeping {
                state.writerSleeping = false
                wake = true
            }
            return (wake, !state.hasRoom)
        }
        if wake { wakeup.signal() }
        return full
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
                    if state.queue.isEmpty {
                        state.writerSleeping = true
                        return nil
                    }
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
        }
    }

    /// Writes `bytes` and accounts for them; false once the peer is gone (the thread ends).
    private func write(_ bytes: [UInt8]) -> Bool {
        let ok = !isBroken && OutputFile.writeAll(fileDescriptor, bytes)
        let (spaceWaiters, drainWaiters, releaseReader, peerGone):
            ([CheckedContinuation<Void, Never>], [CheckedContinuation<Void, Never>], Bool, Bool) =
                state.withLock { state in
                    state.queuedBytes -= bytes.count
                    var peerGone = false
                    if !ok && !state.broken {
                        state.broken = true
                        state.queue = []
                        state.queuedBytes = 0
                        peerGone = true
                    }
                    var space: [CheckedContinuation<Void, Never>] = []
                    var releaseReader = false
                    if state.hasRoom {
                        space = state.spaceWaiters
                        state.spaceWaiters = []
                        releaseReader = state.readerParked
                        state.readerParked = false
                        state.producersWaiting = false
                    }
                    var drained: [CheckedContinuation<Void, Never>] = []
                    if state.isDrained {
                        drained = state.drainWaiters
                        state.drainWaiters = []
                    }
                    return (space, drained, releaseReader, peerGone)
                }
        if releaseReader { readerWakeup.signal() }
        for waiter in spaceWaiters { waiter.resume() }
        for waiter in drainWaiters { waiter.resume() }
        if peerGone {
            log.debug("stdout closed by the peer")
            onPeerGone()
        }
        return ok
    }
}
