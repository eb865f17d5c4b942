import TokenRelayErrorKinds

/// An HTTP header list that keeps order and repeated fields; names compare case-insensitively.
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    /// The fields in the order they were added or received.
    public private(set) var fields: [(name: String, value: String)]

    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// The first value of `name`, if any.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool { fields.contains { $0.name.caseInsensitiveEquals(name) } }

    /// Appends a field (keeps existing fields of the same name).
    public mutating func add(name: String, value: String) { fields.append((name, value)) }

    /// Replaces every field named `name` with one field.
    public mutating func set(name: String, value: String) {
        remove(name)
        fields.append((name, value))
    }

    /// Removes every field named `name`.
    public mutating func remove(_ name: String) { fields.removeAll { $0.name.caseInsensitiveEquals(name) } }
}

extension String {
    /// ASCII case-insensitive equality, as HTTP field names compare.
    public func caseInsensitiveEquals(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        func same(_ x: UInt8, _ y: UInt8) -> Bool {
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) &- 0x61 < 26)
        }
        // On the bytes in place (every native and small string has them): a header lookup is
        // made several times per request, and the views' zipped iterators cost ~3x as much.
        let contiguous = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in
                for index in 0..<x.count where !same(x[index], y[index]) { return false }
                return true
            }
        }
        if let contiguous, let result = contiguous { return result }
        return zip(a, b).allSatisfy(same)
    }
}

/// A TLS client certificate and its private key (PEM), presented in the handshake (mutual TLS,
/// RFC 8705). A class: requests carry a reference, and its bytes are never printed.
public final class ClientIdentity: Sendable, CustomStringConvertible {
    /// The certificate (chain), PEM.
    public let certificatePEM: [UInt8]
    /// Its private key, PEM.
    public let keyPEM: [UInt8]

    public init(certificatePEM: [UInt8], keyPEM: [UInt8]) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    public var description: String { "ClientIdentity(<redacted>)" }
}

/// One HTTP request as the transport sends it. The URL is absolute and already encoded.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    /// libcurl's parse of `url` when the caller made it (``init(method:parsedURL:headers:body:timeout:connectTimeout:)``):
    /// the origin checks and the transfer use it instead of parsing again, for as long as its
    /// text is `url` (a middleware that changes `url` gets a fresh parse: ``targetURL()``).
    public var parsedURL: ParsedURL?
    public var headers: HTTPHeaders
    public var body: [UInt8]?
    /// A body produced while it is sent (instead of `body`): sent once, never replayed.
    public var bodyStream: HTTPRequestBodyStream?
    /// Bounds the whole exchange (connect, send, wait, receive). `nil`: no total bound.
    public var timeout: Duration?
    /// Bounds connection setup (DNS, TCP, TLS). `nil`: the transport's default.
    public var connectTimeout: Duration?
    /// An absolute bound for everything done for this request (credentials, replays and the
    /// transfer): each step gets only the time left. `nil`: only `timeout` applies.
    public var deadline: ContinuousClock.Instant?
    /// Whether the body is collected or streamed.
    public var delivery: HTTPResponseDelivery = .buffered
    /// The TLS client certificate to present (mutual TLS), if any.
    public var clientIdentity: ClientIdentity?
    /// Whether the body is delivered decoded: the transport asks for every content coding
    /// libcurl decodes (`Accept-Encoding`, unless the request sets its own), decodes whatever
    /// coding the server applied (one it cannot decode fails the transfer), and answers without
    /// `Content-Encoding` and `Content-Length` (they described the coded body). `false`: no
    /// coding is asked for and the body is delivered as sent.
    public var decodesContent = false
    /// Told when a middleware replays this request in answer to a response (an event stream
    /// announces that reconnect); `nil`: nobody listens.
    public var replayObserver: (@Sendable (HTTPReplayEvent) -> Void)?

    /// The bound for a transfer starting `now`: the smaller of `timeout` and the time left until
    /// `deadline` (at least one millisecond, so an expired deadline times out at once).
    public func effectiveTimeout(now: ContinuousClock.Instant) -> Duration? {
        guard let deadline else { return timeout }
        let left = max(deadline - now, .milliseconds(1))
        return timeout.map { min($0, left) } ?? left
    }

    public init(
        method: String = "GET", url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil,
        timeout: Duration? = nil, connectTimeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectTimeout = connectTimeout
    }

    /// A request to an already parsed URL (`url` is its text).
    public init(
        method: String = "GET", parsedURL: ParsedURL, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil,
        timeout: Duration? = nil, connectTimeout: Duration? = nil
    ) {
        self.init(
            method: method, url: parsedURL.text, headers: headers, body: body, timeout: timeout,
            connectTimeout: connectTimeout)
        self.parsedURL = parsedURL
    }

    /// `url` as libcurl parses it: the kept parse while it still describes `url`, else a new one.
    public func targetURL() throws(URLProblem) -> ParsedURL {
        if let parsedURL, parsedURL.text == url { return parsedURL }
        return try ParsedURL(url)
    }
}

/// A complete HTTP response. Any status is a response, never an error.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why a request produced no response. Descriptions never contain header values or bodies.
public enum HTTPError: KindedError, Sendable, Equatable, CustomStringConvertible {
    /// DNS, connection or protocol failure, with libcurl's reason. May go away on retry.
    case transport(String)
    /// The TLS handshake failed or the peer's certificate was not trusted (`ca_file`, host name,
    /// expiry...). Final: retrying cannot cure it.
    case tls(String)
    /// The request's time bound ran out.
    case timeout
    /// The response body exceeded the configured limit (bytes).
    case bodyTooLarge(limit: Int)
    /// The URL could not be used (not absolute, unsupported scheme, ...).
    case invalidURL(String)
    /// The request cannot be sent as built: a header that is not a token, a value with CR, LF
    /// or NUL, a framing or hop-by-hop header the transport owns. Final.
    case invalidRequest(String)
    /// The caller's task was cancelled; the transfer was removed.
    case cancelled

    /// Whether sending the same request again could succeed: a connection that failed or a
    /// transfer that timed out. A TLS failure meets the same certificate again, a refused URL or
    /// request and an answer too large would be refused again, and a cancellation is the caller's.
    public var isRetryable: Bool {
        switch self {
        case .transport, .timeout: true
        case .tls, .bodyTooLarge, .invalidURL, .invalidRequest, .cancelled: false
        }
    }

    public var description: String {
        switch self {
        case .transport(let reason): "transport error: \(reason)"
        case .tls(let reason): "TLS error: \(reason)"
        case .timeout: "timed out"
        case .bodyTooLarge(let limit): "response body exceeds the limit of \(limit) bytes"
        case .invalidURL(let reason): "invalid URL: \(reason)"
        case .invalidRequest(let reason): "invalid request: \(reason)"
        case .cancelled: "cancelled"
        }
    }

    /// The wire kind (SPEC §4.4): a request that cannot be built as given is the caller's params.
    public var errorKind: ErrorKind {
        switch self {
        case .transport, .tls: .transport
        case .timeout: .timeout
        case .bodyTooLarge: .limit
        case .invalidURL, .invalidRequest: .invalidParams
        case .cancelled: .cancelled
        }
    }
}

/// How a transport hands over a response body.
public enum HTTPResponseDelivery: Sendable, Hashable {
    /// Collected whole, up to the transport's body limit (past it ``HTTPError/bodyTooLarge(limit:)``);
    /// the request's `timeout` bounds the exchange. The body comes as one chunk.
    case buffered
    /// Handed over as it arrives, with back-pressure: a slow reader pauses the transfer. No total
    /// timeout, only the connect timeout and `idleTimeout` (no byte for that long while we are
    /// not pausing: the body throws ``HTTPStreamStalled``); `nil` uses the transport's default.
    case streamed(idleTimeout: Duration?)
}

/// What a middleware tells the caller when it answers a response by sending the request again
/// (``HTTPRequest/replayObserver``).
public enum HTTPReplayEvent: Sendable, Hashable {
    /// A middleware is about to act on a response of `status` (for example renew a credential
    /// after a 401) in order to replay the request; if that fails, its error is the exchange's.
    case answering(status: Int)
    /// The request is being sent again in answer to a response of `status`.
    case replaying(status: Int)
}

/// Sends one request and returns its response head with the body to read, or throws
/// ``HTTPError``: the one entry point of the transport and of every client built on it (the
/// swift-openapi-runtime `ClientTransport` shape). The request's ``HTTPRequest/delivery`` says
/// whether the body is collected by the transport or streamed. Implementations follow no
/// redirects, keep no cookies and add no ambient credentials.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse
}

extension HTTPTransport {
    /// Sends `request` with its body collected (``HTTPResponseDelivery/buffered``): for callers
    /// that want the whole response. The transport's body limit applies.
    public func send(collecting request: HTTPRequest) async throws -> HTTPResponse {
        var buffered = request
        buffered.delivery = .buffered
        return try await send(buffered).collect()
    }

    /// Sends `request` with its body streamed (``HTTPResponseDelivery/streamed(idleTimeout:)``);
    /// returns once the response head arrived.
    public func stream(_ request: HTTPRequest, idleTimeout: Duration? = nil) async throws -> HTTPStreamingResponse {
        var streamed = request
        streamed.delivery = .streamed(idleTimeout: idleTimeout)
        return try await send(streamed)
    }
}

/// A step folded around a transport: it may change the request, call `next` (zero, one or more
/// times) and change the response. It applies alike to buffered and streamed requests (a
/// response it drops without returning must be cancelled: ``HTTPStreamingResponse/cancel()``).
public protocol HTTPMiddleware: Sendable {
    func intercept(
        _ request: HTTPRequest,
        next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse
}
