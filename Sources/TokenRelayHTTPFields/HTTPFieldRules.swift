/// What may appear in a request's header fields (RFC 9110 §5, RFC 9112 §6, RFC 9113 §8.2.2).
/// The transport applies them to every field it sends; the Relay applies them to caller input
/// first, to answer with a JSON Pointer; Config applies them to configured fields (an
/// environment's `headers`, an `api_key` profile's `header`) at load, to answer with the place
/// in the file. The one copy of these rules: its own module, because Config and HTTP are
/// siblings that cannot import each other.
public enum HTTPFieldRules {
    /// Fields that frame the message or belong to one connection hop. The transport sets them
    /// itself (or never sends them); a caller's copy could make the body a second request on a
    /// shared connection, or route it elsewhere, so they are refused. `Proxy-*` fields are
    /// included as a prefix.
    public static let reservedNames: Set<String> = [
        "content-length", "transfer-encoding", "host", "connection", "keep-alive", "upgrade", "te", "trailer",
    ]

    /// Whether `name` is reserved to the transport: one of ``reservedNames``, any `Proxy-*`
    /// field, or an HTTP/2 pseudo-header (`:path`...).
    public static func isReserved(_ name: String) -> Bool {
        let lower = name.lowercased()
        return reservedNames.contains(lower) || lower.hasPrefix("proxy-") || lower.hasPrefix(":")
    }

    /// Whether `name` is an RFC 9110 token (`tchar`+).
    public static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isTokenCharacter)
    }

    /// RFC 9110 `tchar`.
    public static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Whether `value` can be put on the wire at all: no CR, LF or NUL (which would end the
    /// field, the head, or the C string libcurl copies).
    public static func isTransmittable(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// `text` without leading and trailing optional white space (RFC 9110 §5.6.3: spaces and
    /// horizontal tabs), on its UTF-8 view, without a copy until the result (media types of every
    /// response go through it).
    public static func trimmingWhitespace(_ text: Substring) -> String {
        let utf8 = text.utf8
        func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        var lower = utf8.startIndex
        var upper = utf8.endIndex
        while lower < upper, isWhitespace(utf8[lower]) { lower = utf8.index(after: lower) }
        while upper > lower, isWhitespace(utf8[utf8.index(before: upper)]) { upper = utf8.index(before: upper) }
        return String(text[lower..<upper])
    }

    /// `text` without leading and trailing optional white space, as for a substring.
    public static func trimmingWhitespace(_ text: String) -> String { trimmingWhitespace(text[...]) }

    /// Whether `value` is a clean field value for caller input: no control character (a byte
    /// below 0x20 or 0x7F) except horizontal tab, which RFC 9110 allows inside a value.
    public static func isCleanValue(_ value: String) -> Bool {
        !value.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }

    /// Why a field cannot be sent, or `nil` when it can (the transport's check).
    public static func problem(name: String, value: String) -> String? {
        guard !isReserved(name) else { return "header \(name) is set by the transport and cannot be given" }
        guard isToken(name) else { return "a header field name is not a token" }
        guard isTransmittable(value) else { return "the value of header \(name) contains CR, LF or NUL" }
        return nil
    }
}
