import FoundationEssentials
import Glibc
import Logging

/// Reads the peer's byte stream on a dedicated thread with blocking `read(2)` calls, splits it
/// into frames and hands each to the dispatcher. Before each read it calls `waitForRoom`, which
/// blocks while too many replies wait to be written (``StdioWriter/waitForRoom()``): a client
/// that writes everything before reading cannot deadlock the server as long as its replies fit
/// in that bound, and a peer that never reads stops the reading instead of growing memory. At
/// end of input it calls `onEnd` once.
public final class StdioReader: Sendable {
    private let fileDescriptor: Int32
    private let framing: Framing?
    private let limits: FramingLimits
    private let waitForRoom: @Sendable () -> Void

    public init(
        fileDescriptor: Int32 = 0, framing: Framing?, limits: FramingLimits,
        waitForRoom: @escaping @Sendable () -> Void = {}
    ) {
        self.fileDescriptor = fileDescriptor
        self.framing = framing
        self.limits = limits
        self.waitForRoom = waitForRoom
    }

    /// Starts the reader thread.
    /// - Parameters:
    ///   - onFraming: called once when the framing is known (before the first frame).
    ///   - onMessage: called for every complete message body, in order.
    ///   - onError: called for every bad frame, in order.
    ///   - onEnd: called once at end of input (or on a read error).
    public func start(
        onFraming: @escaping @Sendable (Framing) -> Void,
        onMessage: @escaping @Sendable ([UInt8]) -> Void,
        onError: @escaping @Sendable (FramingError) -> Void,
        onEnd: @escaping @Sendable () -> Void
    ) {
        let fileDescriptor = fileDescriptor
        let framing = framing
        let limits = limits
        let waitForRoom = waitForRoom
        let started = SystemThread.start(named: "relay-stdin") {
            var framer = MessageFramer(framing: framing, limits: limits)
            var announced = false
            // Not zero-filled: its pages are touched only as far as reads fill them.
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 1)
            defer { buffer.deallocate() }
            func deliver(_ outputs: [FramerOutput]) {
                if !announced, let detected = framer.framing {
                    announced = true
                    onFraming(detected)
                }
                for output in outputs {
                    switch output {
                    case .message(let body): onMessage(body)
                    case .error(let error): onError(error)
                    }
                }
            }
            while true {
                waitForRoom()
                let count = read(fileDescriptor, buffer.baseAddress, buffer.count)
                if count < 0 {
                    if errno == EINTR { continue }
                    log.debug("stdin read failed: errno \(errno)")
                    break
                }
                if count == 0 { break }
                deliver(framer.push(UnsafeRawBufferPointer(rebasing: buffer[0..<count])))
            }
            deliver(framer.finish())
            onEnd()
        }
        if !started {
            log.error("no thread to read stdin: ending as at end of input")
            onEnd()
        }
    }
}
