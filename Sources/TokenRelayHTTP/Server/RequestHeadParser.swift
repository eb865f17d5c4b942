import TokenRelayHTTPFields

/// A request head as `tokenrelay exec`'s endpoint reads it (RFC 9112 §2–§6): the request line and
/// the fields, with how the body is framed.
public struct HTTPRequestHead: Sendable, Equatable {
    /// How the request's body is delimited (RFC 9112 §6.3).
    public enum Body: Sendable, Equatable {
        /// No body (no `Content-Length`, no `Transfer-Encoding`).
        case none
        /// Exactly this many bytes.
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
    }

    /// The method as sent (a token; methods are case-sensitive).
    public var method: String
    /// The origin-form target as sent: an absolute path and an optional query.
    public var target: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String
    /// The fields in order, names as sent.
    public var headers: HTTPHeaders
    /// How the body is delimited.
    public var body: Body

    /// Whether the connection stays open after this request's answer (RFC 9112 §9.3).
    public var keepAlive: Bool {
        let tokens = headers.values(for: "connection").flatMap { $0.split(separator: ",") }
            .map { HTTPFieldRules.trimmingWhitespace($0).lowercased() }
        if tokens.contains("close") { return false }
        return version == "HTTP/1.1" || tokens.contains("keep-alive")
    }
}

/// Why a request head is refused, with the status it is answered with.
public struct HTTPRequestHeadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, in a few words (never quoting the request: it may hold a credential).
    public enum Reason: Sendable, Equatable {
        /// The head is larger than the parser's bound.
        case tooLarge
        /// More fields than the parser's bound.
        case tooManyFields
        /// A line not ended by CRLF (a bare CR or LF).
        case bareLineEnding
        /// The request line is not `METHOD SP TARGET SP HTTP-VERSION`.
        case badRequestLine
        /// Not HTTP/1.0 or HTTP/1.1.
        case unsupportedVersion
        /// `CONNECT`, or an authority-form target: this is not a tunnel.
        case connect
        /// An absolute-form (`http://host/...`) or asterisk-form target: this is not a proxy.
        case notOriginForm
        /// A field line that is not `name: value` with a token name and a clean value, or an
        /// obsolete line folding.
        case badField
        /// No `Host`, or more than one (RFC 9112 §3.2).
        case badHost
        /// A `Content-Length` that is not one decimal number, or conflicting ones.
        case badContentLength
        /// A `Transfer-Encoding` other than `chunked`, or with a `Content-Length` (a smuggling
        /// vector), or in an HTTP/1.0 request.
        case badTransferEncoding
    }

    public var reason: Reason

    public init(_ reason: Reason) { self.reason = reason }

    /// The status the endpoint answers with.
    public var status: Int {
        switch reason {
        case .tooLarge, .tooManyFields: 431
        case .unsupportedVersion: 505
        case .connect: 405
        case .badTransferEncoding: 501
        default: 400
        }
    }

    public var description: String {
        switch reason {
        case .tooLarge: "the request head is too large"
        case .tooManyFields: "the request has too many header fields"
        case .bareLineEnding: "a line of the request head does not end with CRLF"
        case .badRequestLine: "the request line is malformed"
        case .unsupportedVersion: "only HTTP/1.1 and HTTP/1.0 are served"
        case .connect: "CONNECT is refused: this endpoint is not a tunnel"
        case .notOriginForm:
            "only paths are served (/ENVIRONMENT/...): absolute URLs are refused, this endpoint is not a proxy"
        case .badField: "a header field is malformed"
        case .badHost: "the request needs exactly one Host field"
        case .badContentLength: "the Content-Length field is malformed"
        case .badTransferEncoding: "only Transfer-Encoding: chunked (without Content-Length) is accepted"
        }
    }
}

/// Reads one request head from bytes as they arrive, in chunks of any size (pure: no I/O).
/// ``feed(_:)`` keeps the bytes of an incomplete head and returns the head once its blank line
/// has arrived, with how many bytes of the chunk it used (the rest is the body's). The head is
/// bounded in bytes and in fields; anything RFC 9112 lets a recipient reject that would let two
/// readers see two different requests (bare line endings, folded fields, conflicting lengths,
/// `Transfer-Encoding` beside `Content-Length`, white space before a field's colon) is refused.
public struct HTTPRequestHeadParser: Sendable {
    /// The default bound on a head's bytes (request line, fields, line endings).
    public static let defaultMaximumHeadBytes = 32 << 10
    /// The default bound on a head's fields.
    public static let defaultMaximumFields = 128

    /// The bytes of the head so far.
    private var buffer: [UInt8] = []
    private let maximumHeadBytes: Int
    private let maximumFields: Int

    public init(
        maximumHeadBytes: Int = HTTPRequestHeadParser.defaultMaximumHeadBytes,
        maximumFields: Int = HTTPRequestHeadParser.defaultMaximumFields
    ) {
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumFields = maximumFields
    }

    /// Whether bytes of a head have been fed and the head is not complete yet.
    public var hasPartialHead: Bool { !buffer.isEmpty }

    /// Consumes `chunk`. Returns `nil` while the head is incomplete (every byte kept), or the head
    /// and how many bytes of `chunk` were part of it; the parser is then ready for the next head.
    public mutating func feed(_ chunk: some Collection<UInt8>) throws(HTTPRequestHeadError) -> (
        head: HTTPRequestHead, consumed: Int
    )? {
        var consumed = 0
        for byte in chunk {
            consumed += 1
            buffer.append(byte)
            let count = buffer.count
            if count >= 4, byte == 0x0A, buffer[count - 2] == 0x0D, buffer[count - 3] == 0x0A,
                buffer[count - 4] == 0x0D
            {
                defer { buffer.removeAll(keepingCapacity: false) }
                let head = try Self.parse(buffer[..<(count - 4)], maximumFields: maximumFields)
                return (head, consumed)
            }
            if count > maximumHeadBytes {
                buffer.removeAll(keepingCapacity: false)
                throw HTTPRequestHeadError(.tooLarge)
            }
        }
        return nil
    }

    /// Parses a complete head without its final blank line.
    static func parse(_ bytes: ArraySlice<UInt8>, maximumFields: Int) throws(HTTPRequestHeadError) -> HTTPRequestHead {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == 0x0D {
                guard index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A else {
                    throw HTTPRequestHeadError(.bareLineEnding)
                }
                lines.append(bytes[start..<index])
                index += 2
                start = index
                continue
            }
            if byte == 0x0A { throw HTTPRequestHeadError(.bareLineEnding) }
            index += 1
        }
        lines.append(bytes[start..<bytes.endIndex])
        guard lines.count - 1 <= maximumFields else { throw HTTPRequestHeadError(.tooManyFields) }
        var head = try parseRequestLine(lines[0])
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() { fields.append(try parseField(line)) }
        head.headers = HTTPHeaders(fields)
        head.body = try framing(of: head)
        return head
    }

    private static func parseRequestLine(_ line: ArraySlice<UInt8>) throws(HTTPRequestHeadError) -> HTTPRequestHead {
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
            parts[0].allSatisfy(HTTPFieldRules.isTokenCharacter),
            parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw HTTPRequestHeadError(.badRequestLine) }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            if version.hasPrefix("HTTP/") { throw HTTPRequestHeadError(.unsupportedVersion) }
            throw HTTPRequestHeadError(.badRequestLine)
        }
        if method == "CONNECT" { throw HTTPRequestHeadError(.connect) }
        guard target.hasPrefix("/") else {
            // `host:port` (authority-form) is CONNECT's; `*` is OPTIONS' asterisk-form;
            // anything else with a scheme is absolute-form.
            if !target.contains("/"), target.contains(":"), target != "*" { throw HTTPRequestHeadError(.connect) }
            throw HTTPRequestHeadError(.notOriginForm)
        }
        // `//host/path` is a network-path reference: a URL parser reads it as another host.
        if target.hasPrefix("//") { throw HTTPRequestHeadError(.notOriginForm) }
        return HTTPRequestHead(method: method, target: target, version: version, headers: HTTPHeaders(), body: .none)
    }

    private static func parseField(_ line: ArraySlice<UInt8>) throws(HTTPRequestHeadError) -> (
        name: String, value: String
    ) {
        // An obsolete line folding (RFC 9112 §5.2) starts with white space; no name is empty.
        guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex else {
            throw HTTPRequestHeadError(.badField)
        }
        let name = line[..<colon]
        // White space between the name and the colon is refused (RFC 9112 §5.1).
        guard name.allSatisfy(HTTPFieldRules.isTokenCharacter) else { throw HTTPRequestHeadError(.badField) }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        guard !value.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else {
            throw HTTPRequestHeadError(.badField)
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private static func framing(of head: HTTPRequestHead) throws(HTTPRequestHeadError) -> HTTPRequestHead.Body {
        let hosts = head.headers.values(for: "host")
        guard hosts.count == 1, let host = hosts.first, !host.isEmpty else { throw HTTPRequestHeadError(.badHost) }
        let encodings = head.headers.values(for: "transfer-encoding")
        let lengths = head.headers.values(for: "content-length")
        if !encodings.isEmpty {
            let codings = encodings.flatMap { $0.split(separator: ",") }.map {
                HTTPFieldRules.trimmingWhitespace($0).lowercased()
            }
            guard lengths.isEmpty, head.version == "HTTP/1.1", codings == ["chunked"] else {
                throw HTTPRequestHeadError(.badTransferEncoding)
            }
            return .chunked
        }
        guard !lengths.isEmpty else { return .none }
        // `Content-Length: 5, 5` and repeated equal fields are one length (RFC 9110 §8.6).
        let values = Set(
            lengths.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map {
                HTTPFieldRules.trimmingWhitespace($0)
            })
        guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.count <= 18,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(text)
        else { throw HTTPRequestHeadError(.badContentLength) }
        return length == 0 ? .none : .length(length)
    }
}
