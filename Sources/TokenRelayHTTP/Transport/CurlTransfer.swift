import CCurl
import TokenRelayHTTPFields

/// One request in flight on the ``CurlEventLoop``.
///
/// Ownership and threads: the caller's task creates it and sets its continuation, then hands it
/// to the loop through the loop's locked inbox (that lock is the happens-before edge). From then
/// on ONLY the loop thread reads or writes its `var`s. Other tasks hold references only to
/// enqueue commands about it (cancel, resume); the `StreamChannel` it points to has its own lock.
final class CurlTransfer: @unchecked Sendable {  // Safe: see the ownership rule above.
    /// Where response bytes go.
    enum Sink {
        /// Collected into one body of at most `limit` bytes.
        case buffered(limit: Int)
        /// Handed to a bounded channel read by the consumer.
        case stream(StreamChannel)
    }

    /// The response head a stream caller waits for.
    struct Head: Sendable {
        var status: Int
        var headers: HTTPHeaders
    }

    let request: HTTPRequest
    /// The request's URL as libcurl parsed it; attached with CURLOPT_CURLU, so the transfer
    /// connects to exactly the origin ``ParsedURL`` reports.
    let target: ParsedURL
    /// Header lines to send (`Name: value`), validated, including transport defaults.
    let headerLines: [String]
    let sink: Sink
    /// Stall bound for streams in nanoseconds; 0: none.
    let idleTimeoutNanoseconds: UInt64

    // MARK: Loop-thread state

    var head = ResponseHeadParser()
    var body: [UInt8] = []
    var bodyTooLarge = false
    var stalled = false
    /// Set when a cancel command arrived before the add command.
    var cancelRequested = false
    /// Whether the transfer is attached to the multi handle.
    var isActive = false
    /// Monotonic time of the last received byte (or resume), for the idle bound.
    var lastActivityNanoseconds: UInt64 = 0
    /// The easy handle while active (owned by the loop's pool).
    var easy: CurlEasyHandle?
    /// The `curl_slist` of request headers while active.
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Resumed once, by the loop thread, for buffered transfers.
    var completion: CheckedContinuation<HTTPResponse, any Error>?
    /// Resumed once, by the loop thread, for streams when the head arrives (or the transfer fails).
    var headContinuation: CheckedContinuation<Head, any Error>?

    init(
        request: HTTPRequest, target: ParsedURL, headerLines: [String], sink: Sink,
        idleTimeoutNanoseconds: UInt64 = 0
    ) {
        self.request = request
        self.target = target
        self.headerLines = headerLines
        self.sink = sink
        self.idleTimeoutNanoseconds = idleTimeoutNanoseconds
    }

    /// Builds the header lines libcurl sends for `request`, or throws
    /// ``HTTPError/invalidRequest(_:)`` when a field breaks ``HTTPFieldRules`` (a name that is not
    /// a token, a value with CR, LF or NUL, a framing or hop-by-hop field).
    ///
    /// What goes on the wire besides the caller's fields: `Host`, `Accept: */*` (unless the
    /// caller sets `Accept`), `Content-Length` for bodies, `Accept-Encoding` only for a request
    /// that ``HTTPRequest/decodesContent``, and nothing else — no `User-Agent`, no
    /// `Expect: 100-continue`, no default `Content-Type` for bodies.
    static func headerLines(for request: HTTPRequest) throws(HTTPError) -> [String] {
        var lines: [String] = []
        lines.reserveCapacity(request.headers.fields.count + 2)
        for (name, value) in request.headers.fields {
            if let problem = HTTPFieldRules.problem(name: name, value: value) { throw .invalidRequest(problem) }
            // "Name;" is libcurl's spelling for a field with an empty value.
            lines.append(value.isEmpty ? name + ";" : name + ": " + value)
        }
        if !request.headers.contains("Expect") { lines.append("Expect:") }
        if request.body != nil || request.bodyStream != nil || bodyMethods.contains(request.method),
            !request.headers.contains("Content-Type")
        {
            lines.append("Content-Type:")
        }
        return lines
    }

    /// Methods sent with an (empty) body when the request has none, so a `Content-Length: 0` goes out.
    static let bodyMethods: Set<String> = ["POST", "PUT", "PATCH"]

    /// Parses `request`'s URL with libcurl's URL API, or throws ``HTTPError/invalidURL(_:)``.
    static func target(for request: HTTPRequest) throws(HTTPError) -> ParsedURL {
        do {
            return try request.targetURL()
        } catch {
            throw .invalidURL(error.description)
        }
    }

    /// The head received so far; for a request that ``HTTPRequest/decodesContent``, without the
    /// fields that described the coded body.
    var currentHead: Head {
        var headers = HTTPHeaders(head.fields)
        if request.decodesContent {
            headers.remove("Content-Encoding")
            headers.remove("Content-Length")
        }
        return Head(status: head.status, headers: headers)
    }
}
