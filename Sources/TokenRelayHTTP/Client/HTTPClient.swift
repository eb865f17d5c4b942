/// A transport with middlewares folded around it. The first middleware is the outermost: it sees
/// the request first and the response last. A client is itself a transport: buffered requests and
/// event streams go through the same middlewares.
public struct HTTPClient: HTTPTransport {
    /// The transport at the core.
    public let transport: any HTTPTransport
    /// The middlewares, outermost first.
    public let middlewares: [any HTTPMiddleware]
    private let chain: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse

    public init(transport: any HTTPTransport, middlewares: [any HTTPMiddleware] = []) {
        self.transport = transport
        self.middlewares = middlewares
        var next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse = { request in
            try await transport.send(request)
        }
        for middleware in middlewares.reversed() {
            let inner = next
            next = { request in try await middleware.intercept(request, next: inner) }
        }
        chain = next
    }

    /// Sends `request` through every middleware and the transport.
    public func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        try await chain(request)
    }
}
