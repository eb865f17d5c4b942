import Synchronization
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// A libcurl transport created on first use, so that starting the server (and answering
/// `initialize` or `ping`) costs no thread and no TLS initialisation for environments that a
/// session never calls.
final class LazyTransport: HTTPTransport {
    private let options: CurlTransport.Options
    /// Guarded by the mutex: the transport, once created.
    private let transport = Mutex<CurlTransport?>(nil)

    init(options: CurlTransport.Options) {
        self.options = options
    }

    private func current() throws -> CurlTransport {
        try transport.withLock { (existing: inout CurlTransport?) throws(HTTPError) -> CurlTransport in
            if let existing { return existing }
            let created = try CurlTransport(options: options)
            existing = created
            return created
        }
    }

    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        try await current().send(request)
    }

    /// The transport's loop as a task executor, once the transport exists (it is not created for
    /// this: a request before the first transfer runs where the process's own tasks run).
    var startedExecutor: (any TaskExecutor)? {
        transport.withLock { $0 }?.executor
    }

    /// The transport's loop as a reader of stdin, once the transport exists.
    var startedInputPoller: (any InputPoller)? {
        transport.withLock { $0 }?.inputPoller
    }

    /// Stops the transport if it was ever created.
    func shutdown() {
        transport.withLock { $0 }?.shutdown()
    }
}
