import TokenRelayLogging
import TokenRelayPlatform

/// Reads the peer's byte stream, splits it into frames and hands each to the dispatcher, in
/// order. Who reads is ``InputReader``'s business (TokenRelayPlatform): a thread of its own,
/// then the transfer loop that adopts the input (`poller`), and a thread again when that loop
/// stops; this keeps the framing state, which travels with the input from owner to owner.
///
/// Before each read the owner asks `room` whether too many replies wait to be written
/// (``StdioWriter/hasRoom(orWhenRoom:)``): a client that writes everything before reading cannot
/// deadlock the server as long as its replies fit in that bound, and a peer that never reads
/// stops the reading instead of growing memory. At end of input it calls `onEnd` once. Frames are
/// parsed on the owner's thread: a very large request (up to the 64 MiB frame limit) holds a
/// loop's transfers back while it is parsed, as it held back the reading of stdin before.
public final class StdioReader: @unchecked Sendable {
    // Safe: the framing state below is used by one owner at a time (``InputReader``'s rule).

    private let input: InputReader
    private var framer: MessageFramer
    private var announced = false

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
        framer = MessageFramer(framing: framing, limits: limits)
        input = InputReader(
            fileDescriptor: fileDescriptor, threadName: "relay-stdin", room: room, poller: poller,
            report: { report in
                switch report {
                case .noThread: log.error("no thread to read stdin: ending as at end of input")
                case .readFailed(let code): log.debug("stdin read failed: errno \(code)")
                case .handedBack: log.debug("stdin: read by a thread of its own again")
                }
            })
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
        input.start(
            onBytes: { [self] bytes in deliver(framer.push(bytes)) },
            onEnd: { [self] in
                deliver(framer.finish())
                onEnd()
            })
    }
}
