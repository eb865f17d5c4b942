import CSystem
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a byte stream (the server's stdin) with one owner at a time. It starts on a thread of
/// its own doing blocking `read(2)` calls; once an event loop is running (`poller` names one), the
/// thread hands the input over to it after its next read and ends, and the loop reads whenever
/// the input polls readable (``PolledInput``): a request then goes from the peer to the loop that
/// serves it without waking a second thread. When that loop stops, the input comes back to a new
/// thread of its own.
///
/// Before each read the owner asks `room` whether too much output waits to be written (stdout's
/// bound); while it does, the thread blocks and a loop leaves the input out of its poll: a peer
/// that never reads stops the reading instead of growing memory.
///
/// A loop reads only what the input holds (`FIONREAD`), or its end (libcurl's poll reports a
/// pipe's end, `POLLHUP`, as readable), so it does not wait in a read for input to come (only
/// another process reading the same input between the check and the read could make it wait, and
/// nothing shares a server's stdin). What is read goes to the consumer on the owner's thread.
public final class InputReader: PolledInput, @unchecked Sendable {
    // Safe: the consumer and its state are used by one owner at a time — the thread, or the loop
    // that adopted the input — and the hand-over passes through the loop's locked queue (or a
    // thread's creation), which orders the accesses. The rest is immutable.

    /// What the reader tells its owner besides bytes.
    public enum Report: Sendable {
        /// No thread could be started to read: the input is treated as ended.
        case noThread
        /// A read failed (`errno`): the input is treated as ended.
        case readFailed(Int32)
        /// A stopping loop gave the input back; a thread of its own reads it again.
        case handedBack
    }

    private struct Consumer {
        let onBytes: (UnsafeRawBufferPointer) -> Void
        let onEnd: () -> Void
    }

    public let fileDescriptor: Int32
    private let room: @Sendable (@escaping @Sendable () -> Void) -> Bool
    private let poller: @Sendable () -> (any InputPoller)?
    private let report: @Sendable (Report) -> Void
    private let threadName: String

    // The owner's state.
    private var consumer: Consumer?
    /// Signalled once each time the output has room again for a thread held back by `room`
    /// (only ever signalled after `room` said no, so no signal is left over).
    private let roomAgain = DispatchSemaphore(value: 0)
    /// Not zero-filled: its pages are touched only as far as reads fill them.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 1)

    /// - Parameters:
    ///   - room: whether there is room for more output; when there is not, it calls its argument
    ///     once there is.
    ///   - poller: a running event loop that may take the input over, if any (asked after each
    ///     read of the thread).
    ///   - report: told of what is not bytes (``Report``), from the owner's thread.
    public init(
        fileDescriptor: Int32, threadName: String,
        room: @escaping @Sendable (@escaping @Sendable () -> Void) -> Bool,
        poller: @escaping @Sendable () -> (any InputPoller)?,
        report: @escaping @Sendable (Report) -> Void
    ) {
        self.fileDescriptor = fileDescriptor
        self.threadName = threadName
        self.room = room
        self.poller = poller
        self.report = report
    }

    deinit {
        buffer.deallocate()
    }

    /// Starts reading on the reader thread: `onBytes` gets every read's bytes, in order, and
    /// `onEnd` is called once at the end of the input (or on a read error). Both run on whichever
    /// thread owns the input: they must not block.
    public func start(onBytes: @escaping (UnsafeRawBufferPointer) -> Void, onEnd: @escaping () -> Void) {
        consumer = Consumer(onBytes: onBytes, onEnd: onEnd)
        startThread()
    }

    /// Reads on a thread of its own until the end of input or until a loop takes the input.
    private func startThread() {
        let started = SystemThread.start(named: threadName) { [self] in
            // Read first, then offer: a thread that got the input back from a stopping loop
            // waits for input before offering it to another loop, rather than passing it around.
            while true {
                waitForRoom()
                guard readOnce(waitingWhenEmpty: true) else { return }
                if let poller = poller(), poller.adopt(self) { return }
            }
        }
        if !started {
            report(.noThread)
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

    /// The loop's read: only when the input holds something, so that the loop does not wait for
    /// input (when another process sharing it took what was polled, nothing is read and the loop
    /// polls again); with nothing held, a read only when the input is at its end (hung up, or
    /// readable with nothing held: a socket's or a file's end), which returns at once.
    public func readAvailable() -> Bool {
        if tr_readable_bytes(fileDescriptor) == 0 {
            var entry = pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 0) > 0 else { return true }
        }
        return readOnce(waitingWhenEmpty: false)
    }

    /// Reads once and delivers; `false` at the end of input. When a non-blocking input has
    /// nothing to read, the thread waits in poll(2) for more and a loop returns to its own poll.
    private func readOnce(waitingWhenEmpty: Bool) -> Bool {
        while true {
            let count = read(fileDescriptor, buffer.baseAddress, buffer.count)
            if count > 0 {
                consumer?.onBytes(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
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
                report(.readFailed(errno))
            }
            end()
            return false
        }
    }

    /// The end of the input, told once; the consumer is let go (it may hold this reader).
    private func end() {
        let ending = consumer
        consumer = nil
        ending?.onEnd()
    }

    public func handBack() {
        report(.handedBack)
        startThread()
    }
}
