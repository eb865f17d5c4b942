import FoundationEssentials
import TokenRelayLogging
import TokenRelayPlatform

/// The HTTP transport on libcurl's multi interface: one event-loop thread owns one `CURLM`
/// handle (connection reuse, HTTP/1.1 and HTTP/2), any task submits work to it.
///
/// Behaviour: redirects are never followed (a 3xx is the response), no cookie engine, no netrc,
/// TLS verification always on (``Options/caFile`` adds a private CA bundle), only `http` and
/// `https`, proxies from `http_proxy`/`https_proxy`/`all_proxy`/`no_proxy` (lower case; libcurl
/// ignores upper-case `HTTP_PROXY`) or ``Options/proxy``, except for loopback destinations,
/// which never go through a proxy (a proxy would see credentials in clear text). The URL is
/// parsed once by libcurl's URL API (``ParsedURL``) and the transfer uses that very parse
/// (CURLOPT_CURLU). Framing and hop-by-hop fields are refused (``HTTPFieldRules``). Besides the caller's fields the
/// request carries `Host`, `Accept: */*` (unless set), and `Content-Length` with a body; no
/// `User-Agent`, `Expect` or default `Content-Type`, and no `Accept-Encoding` unless the request
/// ``HTTPRequest/decodesContent`` (then the body comes back decoded).
public final class CurlTransport: HTTPTransport {
    /// Settings fixed for the transport's life.
    public struct Options: Sendable {
        /// A PEM bundle of CA certificates to trust instead of the system's (`ca_file`).
        public var caFile: String?
        /// An explicit proxy URL; `nil` lets libcurl use the environment variables.
        public var proxy: String?
        /// Largest response body `send` accepts; past it ``HTTPError/bodyTooLarge(limit:)``.
        public var maxResponseBytes: Int
        /// Connection setup bound when a request sets none.
        public var connectTimeout: Duration
        /// Bytes a stream buffers before its transfer is paused.
        public var streamBufferBytes: Int
        /// Stream stall bound when `stream` is given none; `nil`: none.
        public var streamIdleTimeout: Duration?
        /// Connections per host (0: unlimited; more transfers wait inside libcurl).
        public var maxConnectionsPerHost: Int
        /// Connections kept open after use, at least: a burst of this many requests finds its
        /// connections open again after a lull (more while more transfers run: four per transfer).
        public var keptConnections: Int

        public init(
            caFile: String? = nil, proxy: String? = nil, maxResponseBytes: Int = 32 << 20,
            connectTimeout: Duration = .seconds(10), streamBufferBytes: Int = 256 << 10,
            streamIdleTimeout: Duration? = nil, maxConnectionsPerHost: Int = 0, keptConnections: Int = 256
        ) {
            self.caFile = caFile
            self.proxy = proxy
            self.maxResponseBytes = maxResponseBytes
            self.connectTimeout = connectTimeout
            self.streamBufferBytes = streamBufferBytes
            self.streamIdleTimeout = streamIdleTimeout
            self.maxConnectionsPerHost = maxConnectionsPerHost
            self.keptConnections = keptConnections
        }
    }

    /// The settings this transport was created with.
    public let options: Options
    private let loop: CurlEventLoop

    /// Loads and initialises libcurl now, for a command that sends a request anyway (`call` does
    /// it on a thread of its own, `OneShot.CallLibraries`); `false` when it cannot be. The first
    /// transport waits for a load under way (one initialisation, whoever asks first). A URL may
    /// be parsed (libcurl's URL API) while `curl_global_init` still runs here: libcurl's
    /// initialisation is thread-safe from 7.84 on platforms with atomics (the `threadsafe`
    /// feature; Debian 12 ships 7.88). Not for `serve`, which must not map libcurl before its
    /// first request.
    @discardableResult
    public static func loadLibrary() -> Bool { CurlEventLoop.isLibraryReady }

    /// Starts the event-loop thread. Throws when libcurl cannot be initialised.
    public init(options: Options = Options()) throws(HTTPError) {
        self.options = options
        self.loop = try CurlEventLoop(options: options)
    }

    deinit { loop.enqueue(.shutdown) }

    /// The loop thread as a task executor. A task that prefers it (`Task(executorPreference:)`)
    /// runs between transfers on the thread that does them: its transfers start and finish with
    /// no thread hand-off. Its jobs must not block (they never do in this code: every wait is a
    /// suspension); after ``shutdown()`` its jobs run on the global executor.
    public var executor: any TaskExecutor { loop }

    /// The loop thread as a reader of an input (the server's stdin): it reads the input
    /// between transfers whenever it polls readable, until the input ends or the loop stops.
    public var inputPoller: any InputPoller { loop }

    /// Stops the loop thread; transfers in flight and later calls fail with ``HTTPError/cancelled``.
    public func shutdown() { loop.enqueue(.shutdown) }

    /// Sends `request`: its body collected or streamed as ``HTTPRequest/delivery`` says. Any
    /// status is a response.
    public func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        switch request.delivery {
        case .buffered: HTTPStreamingResponse(try await buffered(request))
        case .streamed(let idleTimeout): try await streamed(request, idleTimeout: idleTimeout)
        }
    }

    /// Sends `request` and returns the whole response.
    private func buffered(_ request: HTTPRequest) async throws -> HTTPResponse {
        if Task.isCancelled { throw HTTPError.cancelled }
        let lines = try CurlTransfer.headerLines(for: request)
        let target = try CurlTransfer.target(for: request)
        let transfer = CurlTransfer(
            request: request, target: target, headerLines: lines, sink: .buffered(limit: options.maxResponseBytes))
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.completion = continuation
                if !loop.enqueue(.add(transfer)) {
                    transfer.completion = nil
                    continuation.resume(throwing: HTTPError.cancelled)
                }
            }
        } onCancel: {
            loop.enqueue(.cancel(transfer))
        }
    }

    /// Starts a streamed request; returns once the head arrived (``HTTPResponseDelivery/streamed(idleTimeout:)``).
    private func streamed(_ request: HTTPRequest, idleTimeout: Duration?) async throws -> HTTPStreamingResponse {
        if Task.isCancelled { throw HTTPError.cancelled }
        let lines = try CurlTransfer.headerLines(for: request)
        let target = try CurlTransfer.target(for: request)
        let channel = StreamChannel(capacity: options.streamBufferBytes)
        var idle: UInt64 = 0
        if let bound = idleTimeout ?? options.streamIdleTimeout {
            let (seconds, attoseconds) = bound.components
            idle = UInt64(max(0, seconds)) &* 1_000_000_000 &+ UInt64(max(0, attoseconds / 1_000_000_000))
        }
        let transfer = CurlTransfer(
            request: request, target: target, headerLines: lines, sink: .stream(channel),
            idleTimeoutNanoseconds: idle)
        let loop = self.loop
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.headContinuation = continuation
                if !loop.enqueue(.add(transfer)) {
                    transfer.headContinuation = nil
                    continuation.resume(throwing: HTTPError.cancelled)
                }
            }
        } onCancel: {
            loop.enqueue(.cancel(transfer))
        }
        let controller = StreamController(channel: channel, loop: loop, transfer: transfer)
        return HTTPStreamingResponse(status: head.status, headers: head.headers, body: HTTPByteStream(controller))
    }
}

/// Connects a ``StreamChannel`` consumer to its transfer: resumes it when drained, removes it when
/// the consumer cancels or every reference to the body is dropped.
final class StreamController: Sendable {
    let channel: StreamChannel
    private let loop: CurlEventLoop
    private let transfer: CurlTransfer

    init(channel: StreamChannel, loop: CurlEventLoop, transfer: CurlTransfer) {
        self.channel = channel
        self.loop = loop
        self.transfer = transfer
    }

    deinit { cancel() }

    /// Asks the loop to resume the paused transfer.
    func requestResume() { loop.enqueue(.resume(transfer)) }

    /// Ends the stream for the consumer and removes the transfer.
    func cancel() {
        let waiter = channel.cancelConsumer(with: HTTPError.cancelled)
        waiter?.resume(throwing: HTTPError.cancelled)
        loop.enqueue(.cancel(transfer))
    }
}
