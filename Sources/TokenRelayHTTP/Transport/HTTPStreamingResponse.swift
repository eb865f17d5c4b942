import TokenRelayErrorKinds

/// A response head with its body to read: what ``HTTPTransport/send(_:)`` returns. The body is
/// either already whole (``HTTPResponseDelivery/buffered``) or arrives over time.
public struct HTTPStreamingResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    /// The body chunks; iterate once. Dropping every copy of it (and its iterator) ends the transfer.
    public var body: HTTPByteStream

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: HTTPByteStream) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is already whole.
    public init(_ response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, body: HTTPByteStream(bytes: response.body))
    }

    /// Ends the transfer now; a pending or later read throws ``HTTPError/cancelled``.
    public func cancel() { body.cancel() }

    /// The whole response: reads the body to its end, at most `limit` bytes (past it the
    /// transfer is ended and ``HTTPError/bodyTooLarge(limit:)`` thrown).
    public func collect(upTo limit: Int = .max) async throws -> HTTPResponse {
        if case .bytes(let bytes) = body.source {
            guard bytes.count <= limit else { throw HTTPError.bodyTooLarge(limit: limit) }
            return HTTPResponse(status: status, headers: headers, body: bytes)
        }
        return try await collectStream(upTo: limit)
    }

    /// A streamed body read to its end. Apart from ``collect(upTo:)``, whose usual case (a body
    /// already whole) then needs no frame for a stream's iterator.
    private func collectStream(upTo limit: Int) async throws -> HTTPResponse {
        var collected: [UInt8] = []
        for try await chunk in body {
            guard collected.count + chunk.count <= limit else {
                body.cancel()
                throw HTTPError.bodyTooLarge(limit: limit)
            }
            collected += chunk
        }
        return HTTPResponse(status: status, headers: headers, body: collected)
    }
}

/// A stream's body thrown at a consumer: the transfer got no byte for the idle bound while it
/// was not paused by us.
public struct HTTPStreamStalled: KindedError, Sendable, Equatable, CustomStringConvertible {
    /// The bound that ran out.
    public let idleTimeout: Duration

    public init(idleTimeout: Duration) { self.idleTimeout = idleTimeout }

    public var description: String { "stream stalled: no data for \(idleTimeout)" }

    /// A stall is a time bound that ran out.
    public var errorKind: ErrorKind { .timeout }
}

/// Body chunks of a streamed response, with back-pressure on the transfer. Single consumer.
///
/// Throws ``HTTPError`` (`.transport` when the connection drops, `.cancelled`) or
/// ``HTTPStreamStalled``. Cancelling the consuming task ends the transfer.
public struct HTTPByteStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    enum Source: Sendable {
        case transfer(StreamController)
        case chunks(AsyncThrowingStream<[UInt8], any Error>)
        case bytes([UInt8])
    }

    let source: Source

    init(_ controller: StreamController) { source = .transfer(controller) }

    /// A body fed by any chunk stream (for fakes and tests).
    public init(_ chunks: AsyncThrowingStream<[UInt8], any Error>) { source = .chunks(chunks) }

    /// A body that is already whole (a buffered transfer): one chunk, none when empty.
    public init(bytes: [UInt8]) { source = .bytes(bytes) }

    /// The channel behind a real transfer (observed by tests).
    var channel: StreamChannel? {
        if case .transfer(let controller) = source { return controller.channel }
        return nil
    }

    /// Ends the transfer (no effect for a fake body).
    public func cancel() {
        if case .transfer(let controller) = source { controller.cancel() }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .transfer(let controller): AsyncIterator(controller: controller, fake: nil)
        case .chunks(let chunks): AsyncIterator(controller: nil, fake: chunks.makeAsyncIterator())
        case .bytes(let bytes): AsyncIterator(controller: nil, fake: nil, whole: bytes.isEmpty ? nil : bytes)
        }
    }

    /// Reads the next chunk; `nil` at the end of the body.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let controller: StreamController?
        var fake: AsyncThrowingStream<[UInt8], any Error>.AsyncIterator?
        /// A whole body not yet handed out.
        var whole: [UInt8]? = nil

        public mutating func next() async throws -> [UInt8]? {
            if let bytes = whole {
                whole = nil
                return bytes
            }
            if fake != nil { return try await fake?.next(isolation: #isolation) }
            guard let controller else { return nil }
            return try await Self.read(controller)
        }

        private static func read(_ controller: StreamController) async throws -> [UInt8]? {
            let channel = controller.channel
            switch channel.read() {
            case .chunk(let chunk, let resume):
                if resume { controller.requestResume() }
                return chunk
            case .end: return nil
            case .failure(let error): throw error
            case .wait: break
            }
            if Task.isCancelled {
                controller.cancel()
                throw HTTPError.cancelled
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<[UInt8]?, any Error>) in
                    switch channel.readOrWait(waiter) {
                    case .chunk(let chunk, let resume):
                        if resume { controller.requestResume() }
                        waiter.resume(returning: chunk)
                    case .end: waiter.resume(returning: nil)
                    case .failure(let error): waiter.resume(throwing: error)
                    case .wait: break
                    }
                }
            } onCancel: {
                controller.cancel()
            }
        }
    }
}
