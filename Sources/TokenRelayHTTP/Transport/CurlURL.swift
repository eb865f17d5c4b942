import CCurl
import TokenRelayHTTPFields

#if canImport(Glibc)
    import Glibc
#endif

// ALL of the unsafe work with libcurl's URL API (curl_url) lives in this file.
//
// Invariants:
// - A `CurlURLHandle` owns exactly one CURLU and frees it in deinit. It is written only while it
//   is parsed (`parse`: set, fragment dropped, parts read); from then on it is only read, by
//   libcurl for the transfers it is attached to (CURLOPT_CURLU handles are used read-only), so
//   the ParsedURL values that share it may go anywhere.
// - Every string curl_url_get returns is copied into a Swift String and freed with curl_free at once.
// - The parser is libcurl's own: the transport sends a request with CURLOPT_CURLU set to the very
//   handle ``ParsedURL`` read its parts from (same function, same flags), so the origin that
//   credentials are checked against is the one the transfer connects to (SPEC §5.3).

/// An absolute `http`/`https` URL as libcurl parses it: the parts the transport will use to
/// connect, and the normalised text it sends (without fragment: a fragment is never sent).
///
/// Rules on top of libcurl's parser: only `http` and `https`; no user information (`user:pw@`);
/// no control character (a byte below 0x20 or 0x7F: a C string would end at a NUL and libcurl
/// would see a different URL than the caller wrote); a host is required.
public struct ParsedURL: Sendable, Hashable, CustomStringConvertible {
    /// The parse: the CURLU the parts were read from, with the parts. A transfer of this URL
    /// sends that very handle (CURLOPT_CURLU), so it is parsed once however many checks look at
    /// it; a copy of a ``ParsedURL`` (every request carries one through its middlewares) shares it.
    let handle: CurlURLHandle

    /// The URL libcurl will request, normalised (`scheme://host[:port]/path[?query]`).
    public var text: String { handle.text }
    /// `http` or `https`.
    public var scheme: String { handle.scheme }
    /// The host as libcurl connects to it (percent-decoded, IPv4 normalised, IPv6 in brackets,
    /// without zone id).
    public var host: String { handle.host }
    /// The IPv6 zone id (`%eth0`), if any.
    public var zoneID: String? { handle.zoneID }
    /// The port, the scheme's default when the URL names none.
    public var port: Int { handle.port }
    /// `scheme://host[:port]` as libcurl writes it: ``text`` up to the path.
    public var root: String { handle.root }
    /// The path (at least `/`): ``text`` after ``root`` up to the query (libcurl writes ``text``
    /// from its parts, so this is its path part).
    public var path: String {
        let text = self.text
        let rest = text.utf8.dropFirst(root.utf8.count)
        let end = rest.firstIndex(of: UInt8(ascii: "?")) ?? rest.endIndex
        let path = String(text[rest.startIndex..<end])
        return path.isEmpty ? "/" : path
    }
    /// The query without `?`, if any (``text`` after the first `?`).
    public var query: String? {
        let text = self.text
        let rest = text.utf8.dropFirst(root.utf8.count)
        guard let question = rest.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return String(text[text.utf8.index(after: question)...])
    }
    /// Whether the text had a fragment (dropped from ``text``).
    public var hadFragment: Bool { handle.hadFragment }

    /// Parses `text` with libcurl's URL API; throws ``URLProblem`` when it is not an absolute
    /// http(s) URL that can be sent as written.
    public init(_ text: String) throws(URLProblem) {
        self = try CurlURLHandle.parse(text)
    }

    // The parts follow from `text` (one parser, one set of flags): equal texts, equal URLs.
    public static func == (lhs: ParsedURL, rhs: ParsedURL) -> Bool { lhs.text == rhs.text }
    public func hash(into hasher: inout Hasher) { hasher.combine(text) }

    /// The origin requests to this URL go to. The host is lower-cased; a zone id is kept
    /// (`[fe80::1%eth0]`), since it names another interface.
    public var origin: Origin { handle.origin }

    /// Whether the host is the loopback interface: `localhost` (and `*.localhost`, which libcurl
    /// resolves to loopback itself), 127.0.0.0/8, `::1` and IPv4-mapped 127.0.0.0/8. Decided once,
    /// when parsed (every transfer asks, to keep loopback off any proxy).
    public var isLoopback: Bool { handle.isLoopback }

    public var description: String { text }

    /// Whether `text` holds a control character (a byte below 0x20, or 0x7F).
    public static func containsControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }
}

/// Why a URL was refused. Descriptions never repeat the URL (it may carry a secret query).
public enum URLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// A byte below 0x20 or 0x7F.
    case controlCharacter
    /// A scheme other than http and https.
    case unsupportedScheme
    /// `user[:password]@` in the authority.
    case userInfo
    /// Anything else libcurl's parser refused, with its reason.
    case malformed(String)
    /// libcurl could not be loaded.
    case unavailable

    public var description: String {
        switch self {
        case .controlCharacter: "contains a control character"
        case .unsupportedScheme: "must be an absolute http or https URL"
        case .userInfo: "must not contain user information (user:password@)"
        case .malformed(let reason): "is not a valid URL (\(reason))"
        case .unavailable: "cannot be parsed: libcurl is unavailable"
        }
    }
}

/// One CURLU handle holding a parsed URL, and the parts ``ParsedURL`` shows, read from it once.
/// The transport attaches it to a transfer with CURLOPT_CURLU, so the request goes exactly where
/// ``ParsedURL`` says.
final class CurlURLHandle: @unchecked Sendable {  // Safe: see the file's invariants (written only while parsing).
    let handle: OpaquePointer
    let text: String
    let scheme: String
    let host: String
    let zoneID: String?
    let port: Int
    let root: String
    let hadFragment: Bool
    let isLoopback: Bool
    /// Made once with the parse: every middleware that checks where a request goes asks for it.
    let origin: Origin

    private init(
        _ handle: OpaquePointer, text: String, scheme: String, host: String, zoneID: String?, port: Int, root: String,
        hadFragment: Bool
    ) {
        self.handle = handle
        self.text = text
        self.scheme = scheme
        self.host = host
        self.zoneID = zoneID
        self.port = port
        self.root = root
        self.hadFragment = hadFragment
        isLoopback = URLSyntax.isLoopback(host: host)
        var originHost = host
        if let zoneID, originHost.hasSuffix("]") {
            originHost = String(originHost.dropLast()) + "%" + zoneID + "]"
        }
        origin = Origin(scheme: scheme, host: originHost, port: port)
    }

    /// Parses `text` into a new handle and reads its parts.
    static func parse(_ text: String) throws(URLProblem) -> ParsedURL {
        guard !ParsedURL.containsControlCharacter(text) else { throw .controlCharacter }
        guard tr_curl_load() == 1, let handle = tr_url() else { throw .unavailable }
        let code = text.withCString { tr_url_set(handle, CURLUPART_URL, $0, tr_urlflag_disallow_user()) }
        guard code == CURLUE_OK else {
            tr_url_cleanup(handle)
            switch code {
            case CURLUE_USER_NOT_ALLOWED: throw .userInfo
            case CURLUE_UNSUPPORTED_SCHEME, CURLUE_BAD_SCHEME, CURLUE_NO_SCHEME: throw .unsupportedScheme
            default: throw .malformed(Self.reason(code))
            }
        }
        func part(_ which: CURLUPart, _ flags: UInt32 = 0) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard tr_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
            defer { tr_curl_free(value) }
            return String(cString: value)
        }
        let scheme = part(CURLUPART_SCHEME)?.lowercased() ?? ""
        guard scheme == "http" || scheme == "https" else {
            tr_url_cleanup(handle)
            throw .unsupportedScheme
        }
        // A fragment is never sent; drop it so that the text is what goes out. (Without a '#'
        // there is none to ask libcurl about.)
        let hadFragment = text.utf8.contains(UInt8(ascii: "#")) && part(CURLUPART_FRAGMENT) != nil
        if hadFragment { _ = tr_url_set(handle, CURLUPART_FRAGMENT, nil, 0) }
        guard let host = part(CURLUPART_HOST), !host.isEmpty, let url = part(CURLUPART_URL),
            let portText = part(CURLUPART_PORT, tr_urlflag_default_port()), let port = Int(portText)
        else {
            tr_url_cleanup(handle)
            throw .malformed("no host")
        }
        // No user information, and a host cannot hold '/': the first '/' after "://" starts the path.
        // Scanned on the UTF-8 view (Foundation's range(of:) bridges through NSString).
        let bytes = url.utf8
        let schemeEnd = bytes.firstIndex(of: UInt8(ascii: ":")) ?? bytes.startIndex
        let afterScheme =
            bytes[schemeEnd...].starts(with: "://".utf8) ? bytes.index(schemeEnd, offsetBy: 3) : bytes.startIndex
        let root = String(url[..<(bytes[afterScheme...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex)])
        // Only an IPv6 literal (`[...]`) can carry a zone id.
        let zoneID = host.utf8.first == UInt8(ascii: "[") ? part(CURLUPART_ZONEID) : nil
        return ParsedURL(
            handle: CurlURLHandle(
                handle, text: url, scheme: scheme, host: host, zoneID: zoneID, port: port, root: root,
                hadFragment: hadFragment))
    }

    deinit { tr_url_cleanup(handle) }

    private static func reason(_ code: CURLUcode) -> String {
        guard let text = tr_url_strerror(code) else { return "error \(code.rawValue)" }
        return String(cString: text).lowercased()
    }
}

extension ParsedURL {
    /// For ``CurlURLHandle/parse(_:)`` only.
    fileprivate init(handle: CurlURLHandle) { self.handle = handle }
}
