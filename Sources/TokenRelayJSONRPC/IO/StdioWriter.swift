import Dispatch
import Synchronization
import TokenRelayLogging
import TokenRelayPlatform

/// The one serial writer of protocol frames: frames (NDJSON or LSP, as the peer speaks) handed to
/// the process's ``DescriptorWriter`` for stdout, which writes them whole, in order, never
/// interleaved, and never blocks a producer on a slow peer (a lone answer is written by its
/// producer, without a thread hand-off).
///
/// One bound holds for every frame, whoever produced it (SPEC §7 "Concurrency limits"): while
/// `bound` bytes or more wait to be written, ``send(_:)`` suspends its caller and
/// ``hasRoom(orWhenRoom:)`` holds the stdin reader back before its next read, until the peer has
/// read enough to bring the queue below the bound. ``sendNow(_:)`` never waits and never drops:
/// it is for the stdin reader, whose own replies are bounded by its pausing before each read.
/// `EPIPE` (the peer closed its end) drops all output and reports the peer as gone.
///
/// A server that stops never waits for a peer that stopped reading longer than it said it would
/// (``abandonUnread(after:)``): what the peer has not read by then is abandoned, every producer
/// waiting for room is let go, and ``finish()`` says on stderr how much was lost.
public final class StdioWriter: MessageSink {
    /// The default bound: 32 MiB of frames waiting to be written.
    public static let defaultBound = 32 << 20

    private let output: DescriptorWriter
    /// The framing replies use (the peer's, once detected), and whether producers wait in
    /// ``send(_:)`` since the queue last had room (logged once per episode).
    private let state = Mutex<(framing: Framing, producersWaiting: Bool)>((.ndjson, false))

    /// A writer of frames to `fileDescriptor` (a dup of the real stdout in the server).
    public init(
        fileDescriptor: Int32, bound: Int = StdioWriter.defaultBound, onPeerGone: @escaping @Sendable () -> Void = {}
    ) {
        output = DescriptorWriter(
            fileDescriptor: fileDescriptor, bound: bound, overflow: .wait, threadName: "relay-stdout",
            onBroken: {
                log.debug("stdout closed by the peer")
                onPeerGone()
            })
    }

    /// The framing replies use (the peer's, once detected).
    public var framing: Framing {
        get { state.withLock { $0.framing } }
        set { state.withLock { $0.framing = newValue } }
    }

    public func send(_ message: consuming [UInt8]) async {
        guard output.write(frame(message)) else { return }
        let firstToWait = state.withLock { state in
            defer { state.producersWaiting = true }
            return !state.producersWaiting
        }
        if firstToWait {
            log.debug("stdout backed up: replies wait for the peer", [("queuedBytes", String(output.queuedBytes))])
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resume: @Sendable () -> Void = { [self] in
                state.withLock { $0.producersWaiting = false }
                continuation.resume()
            }
            if output.whenRoom(resume) { resume() }
        }
    }

    public func sendNow(_ message: consuming [UInt8]) {
        output.write(frame(message))
    }

    /// Framed outside the lock, in place for NDJSON (the framing changes only once, when
    /// detected, before the first reply).
    private func frame(_ message: consuming [UInt8]) -> [UInt8] {
        state.withLock { $0.framing }.frame(message)
    }

    /// Whether the queue is below the bound (or the peer is gone). When it is not, `resume` is
    /// called once, from the thread whose write brings it below: the stdin reader's way of
    /// pausing before its next read without blocking whoever reads it.
    public func hasRoom(orWhenRoom resume: @escaping @Sendable () -> Void) -> Bool {
        let room = output.whenRoom {
            log.debug("stdout drained below the bound: stdin resumed")
            resume()
        }
        if !room { log.debug("stdout backed up: stdin paused", [("queuedBytes", String(output.queuedBytes))]) }
        return room
    }

    /// Abandons, once `delay` has passed, whatever the peer has not read by then
    /// (``DescriptorWriter/abandon()``): producers waiting for room (``send(_:)``), the stdin
    /// reader waiting before its next read and ``finish()`` are let go, and frames handed over
    /// later are dropped. How a stopping server bounds its wait for a peer that stopped reading;
    /// nothing is lost from a peer that reads everything before then.
    public func abandonUnread(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [output] in
            output.abandon()
        }
    }

    /// Waits until everything handed over so far has been written, the peer is gone, or the
    /// unread output was abandoned (``abandonUnread(after:)``, the bound of this wait), and then
    /// says on stderr how much was abandoned, if anything (a count: never the content). The last
    /// thing a stopping server does with its output.
    public func finish() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if output.whenDrained({ continuation.resume() }) { continuation.resume() }
        }
        let abandoned = abandonedBytes
        if abandoned > 0 {
            log.warn("stdout was not read: \(abandoned) byte(s) of output abandoned at the end of the grace period")
        }
    }

    /// Bytes abandoned (``abandonUnread(after:)``): unread then, or handed over since.
    public var abandonedBytes: Int { output.abandonedBytes }

    /// Whether the peer has gone away (EPIPE), or the unread output was abandoned.
    public var isBroken: Bool { output.isBroken }
}
