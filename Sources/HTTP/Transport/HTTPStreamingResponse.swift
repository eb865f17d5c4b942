import ErrorKinds

/// A response whose body arrives over time (``HTTPStreamingTransport/stream(_:idleTimeout:)``).
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

    /// Ends the transfer now; a pending or later read throws ``HTTPError/cancelled``.
    public func cancel() { body.cancel() }
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
    }

    let source: Source

    init(_ controller: StreamController) { source = .transfer(controller) }

    /// A body fed by any chunk stream (for fakes and tests).
    public init(_ chunks: AsyncThrowingStream<[UInt8], any Error>) { source = .chunks(chunks) }

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
        }
    }

    /// Reads the next chunk; `nil` at the end of the body.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let controller: StreamController?
        var fake: AsyncThrowingStream<[UInt8], any Error>.AsyncIterator?

        public mutating func next() async throws -> [UInt8]? {
            if fake != nil { return try await fake?.next() }
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
