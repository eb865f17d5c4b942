import CSystem
import Dispatch
import FoundationEssentials
import Glibc
import TokenRelayLogging
import TokenRelayPlatform

/// Reads the peer's byte stream, splits it into frames and hands each to the dispatcher, in
/// order. It starts on a thread of its own doing blocking `read(2)` calls; once an event loop is
/// running (`poller` names one), the thread hands the input over to it after its next read and
/// ends, and the loop reads whenever stdin polls readable (``PolledInput``): a request then
/// goes from the peer to the loop that serves it without waking a second thread. When that loop
/// stops, the input comes back to a new thread of its own, framing state and all.
///
/// Before each read the owner asks `room` whether too many replies wait to be written
/// (``StdioWriter/hasRoom(orWhenRoom:)``); while they do, the thread blocks and a loop leaves
/// stdin out of its poll: a client that writes everything before reading cannot deadlock the
/// server as long as its replies fit in that bound, and a peer that never reads stops the
/// reading instead of growing memory. At end of input it calls `onEnd` once.
///
/// A loop reads only what stdin holds (`FIONREAD`), or its end (libcurl's poll reports a pipe's
/// end, `POLLHUP`, as readable), so it does not wait in a read for input to come (only another
/// process reading the same stdin between the check and the read could make it wait, and nothing
/// shares a server's stdin). It parses what it reads on its own
/// thread: a very large request (up to the 64 MiB frame limit) holds the loop's transfers back
/// while it is parsed, as it held back the reading of stdin before.
public final class StdioReader: PolledInput, @unchecked Sendable {
    // Safe: the framing state below is used by one owner at a time — the thread, or the loop
    // that adopted the input — and the hand-over passes through the loop's locked queue (or a
    // thread's creation), which orders the accesses. The rest is immutable.

    private struct Handlers {
        let onFraming: @Sendable (Framing) -> Void
        let onMessage: @Sendable ([UInt8]) -> Void
        let onError: @Sendable (FramingError) -> Void
        let onEnd: @Sendable () -> Void
    }

    public let fileDescriptor: Int32
    private let room: @Sendable (@escaping @Sendable () -> Void) -> Bool
    private let poller: @Sendable () -> (any InputPoller)?

    // The owner's state.
    private var framer: MessageFramer
    private var announced = false
    private var handlers: Handlers?
    /// Signalled once each time the output has room again for a thread held back by `room`
    /// (only ever signalled after `room` said no, so no signal is left over).
    private let roomAgain = DispatchSemaphore(value: 0)
    /// Not zero-filled: its pages are touched only as far as reads fill them.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 1)

    /// - Parameters:
    ///   - room: whether there is room for more replies; when there is not, it calls its
    ///     argument once there is (``StdioWriter/hasRoom(orWhenRoom:)``).
    ///   - poller: a running event loop that may take the input over, if any (asked after each
    ///     read of the thread).
    public init(
        fileDescriptor: Int32 = 0, framing: Framing?, limits: FramingLimits,
        room: @escaping @Sendable (@escaping @Sendable () -> Void) -> Bool = { _ in true },
        poller: @escaping @Sendable () -> (any InputPoller)? = { nil }
    ) {
        self.fileDescriptor = fileDescriptor
        self.room = room
        self.poller = poller
        framer = MessageFramer(framing: framing, limits: limits)
    }

    deinit {
        buffer.deallocate()
    }

    /// Starts reading on the reader thread.
    /// - Parameters:
    ///   - onFraming: called once when the framing is known (before the first frame).
    ///   - onMessage: called for every complete message body, in order.
    ///   - onError: called for every bad frame, in order.
    ///   - onEnd: called once at end of input (or on a read error).
    /// The handlers run on whichever thread owns the input: they must not block.
    public func start(
        onFraming: @escaping @Sendable (Framing) -> Void,
        onMessage: @escaping @Sendable ([UInt8]) -> Void,
        onError: @escaping @Sendable (FramingError) -> Void,
        onEnd: @escaping @Sendable () -> Void
    ) {
        handlers = Handlers(onFraming: onFraming, onMessage: onMessage, onError: onError, onEnd: onEnd)
        startThread()
    }

    /// Reads on a thread of its own until the end of input or until a loop takes the input.
    private func startThread() {
        let started = SystemThread.start(named: "relay-stdin") { [self] in
            // Read first, then offer: a thread that got stdin back from a stopping loop waits
            // for input before offering it to another loop, rather than passing it around.
            while true {
                waitForRoom()
                guard readOnce(waitingWhenEmpty: true) else { return }
                if let poller = poller(), poller.adopt(self) { return }
            }
        }
        if !started {
            log.error("no thread to read stdin: ending as at end of input")
            end()
        }
    }

    /// Blocks the reader thread while the output has no room.
    private func waitForRoom() {
        if !room({ [roomAgain] in roomAgain.signal() }) { roomAgain.wait() }
    }

    public func mayRead(resume: @escaping @Sendable () -> Void) -> Bool {
        room(resume)
    }

    /// The loop's read: only when stdin holds something, so that the loop does not wait for
    /// input (when another process sharing stdin took what was polled, nothing is read and the
    /// loop polls again); with nothing held, a read only when stdin is at its end (hung up, or
    /// readable with nothing held: a socket's or a file's end), which returns at once.
    public func readAvailable() -> Bool {
        if tr_readable_bytes(fileDescriptor) == 0 {
            var entry = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 0) > 0 else { return true }
        }
        return readOnce(waitingWhenEmpty: false)
    }

    /// Reads once and delivers; `false` at the end of input. When a non-blocking stdin has
    /// nothing to read, the thread waits in poll(2) for more and a loop returns to its own poll.
    private func readOnce(waitingWhenEmpty: Bool) -> Bool {
        while true {
            let count = read(fileDescriptor, buffer.baseAddress, buffer.count)
            if count > 0 {
                deliver(framer.push(UnsafeRawBufferPointer(rebasing: buffer[0..<count])))
                return true
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    guard waitingWhenEmpty else { return true }
                    var entry = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
                    _ = poll(&entry, 1, -1)
                    continue
                }
                log.debug("stdin read failed: errno \(errno)")
            }
            end()
            return false
        }
    }

    public func handBack() {
        log.debug("stdin: read by a thread of its own again")
        startThread()
    }

    private func end() {
        deliver(framer.finish())
        handlers?.onEnd()
    }

    private func deliver(_ outputs: [FramerOutput]) {
        guard let handlers else { return }
        if !announced, let detected = framer.framing {
            announced = true
            handlers.onFraming(detected)
        }
        for output in outputs {
            switch output {
            case .message(let body): handlers.onMessage(body)
            case .error(let error): handlers.onError(error)
            }
        }
    }
}
