import Dispatch
import Foundation
import Logging
import Synchronization

/// The one serial writer of protocol frames. Whole frames are written in the order they were
/// handed over, by a dedicated thread doing blocking `write(2)` calls, so frames never
/// interleave and no cooperative-pool thread ever blocks on a slow peer. When more than
/// `highWater` bytes are waiting, ``send(_:)`` suspends its caller until the queue drains below
/// `lowWater`: a slow reader slows producers down instead of growing memory without bound.
/// `EPIPE` (the peer closed its end) drops all output and reports the peer as gone.
public final class StdioWriter: MessageSink {
    private struct State {
        var queue: [[UInt8]] = []
        var queuedBytes = 0
        var writerSleeping = false
        var closed = false
        var broken = false
        var framing: Framing = .ndjson
        var spaceWaiters: [CheckedContinuation<Void, Never>] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let fileDescriptor: Int32
    private let highWater: Int
    private let lowWater: Int
    private let onPeerGone: @Sendable () -> Void
    /// Guarded by the mutex: the queue and the writer thread's sleep flag.
    private let state = Mutex(State())
    /// Signalled once each time the writer thread is woken after declaring itself asleep.
    private let wakeup = DispatchSemaphore(value: 0)

    /// Starts the writer thread on `fileDescriptor` (a dup of the real stdout in the server).
    public init(
        fileDescriptor: Int32, highWater: Int = 8 << 20, lowWater: Int = 2 << 20,
        onPeerGone: @escaping @Sendable () -> Void = {}
    ) {
        self.fileDescriptor = fileDescriptor
        self.highWater = highWater
        self.lowWater = lowWater
        self.onPeerGone = onPeerGone
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
        let mustWait = enqueue(message)
        guard mustWait else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow: Bool = state.withLock { state in
                if state.broken || state.queuedBytes <= lowWater { return true }
                state.spaceWaiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    public func sendNow(_ message: [UInt8]) {
        _ = enqueue(message)
    }

    /// Queues a frame; returns whether the caller should wait for space.
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
            return (wake, state.queuedBytes > highWater)
        }
        if wake { wakeup.signal() }
        return full
    }

    /// Waits until everything handed over so far has been written (or the peer is gone).
    public func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done: Bool = state.withLock { state in
                if state.broken || (state.queue.isEmpty && state.queuedBytes == 0) { return true }
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
            let batch: [[UInt8]]? = state.withLock { state in
                if state.queue.isEmpty {
                    state.writerSleeping = true
                    return nil
                }
                let batch = state.queue
                state.queue = []
                return batch
            }
            guard let batch else {
                wakeup.wait()
                continue
            }
            var written = 0
            var ok = true
            // Coalesce small frames into one write; large ones go out on their own.
            var pending: [UInt8] = []
            for frame in batch {
                if pending.count + frame.count > 256 << 10, !pending.isEmpty {
                    ok = ok && writeAll(pending)
                    written += pending.count
                    pending.removeAll(keepingCapacity: true)
                }
                if frame.count > 256 << 10 {
                    ok = ok && writeAll(frame)
                    written += frame.count
                } else {
                    pending.append(contentsOf: frame)
                }
            }
            if !pending.isEmpty {
                ok = ok && writeAll(pending)
                written += pending.count
            }
            let (spaceWaiters, drainWaiters, peerGone):
                ([CheckedContinuation<Void, Never>], [CheckedContinuation<Void, Never>], Bool) =
                    state.withLock { state in
                        state.queuedBytes -= written
                        var peerGone = false
                        if !ok && !state.broken {
                            state.broken = true
                            state.queue = []
                            state.queuedBytes = 0
                            peerGone = true
                        }
                        var space: [CheckedContinuation<Void, Never>] = []
                        if state.broken || state.queuedBytes <= lowWater {
                            space = state.spaceWaiters
                            state.spaceWaiters = []
                        }
                        var drained: [CheckedContinuation<Void, Never>] = []
                        if state.broken || (state.queue.isEmpty && state.queuedBytes == 0) {
                            drained = state.drainWaiters
                            state.drainWaiters = []
                        }
                        return (space, drained, peerGone)
                    }
            for waiter in spaceWaiters { waiter.resume() }
            for waiter in drainWaiters { waiter.resume() }
            if peerGone {
                log.debug("stdout closed by the peer")
                onPeerGone()
            }
        }
    }

    /// Writes all of `bytes`; false on EPIPE or any other write error.
    private func writeAll(_ bytes: [UInt8]) -> Bool {
        if isBroken { return false }
        return OutputFile.writeAll(fileDescriptor, bytes)
    }
}
