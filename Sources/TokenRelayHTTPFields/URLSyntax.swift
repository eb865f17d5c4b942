import Glibc

/// An absolute URL split into its RFC 3986 §3 parts, by syntax only: nothing is decoded,
/// normalised or resolved, and no Foundation URL type (whose host handling goes through ICU's
/// IDNA data, which a start would have to map) is involved.
///
/// For diagnostics while a config loads (Config) and for early advisory checks (Auth); the
/// decision on where a request goes is made by libcurl's URL parser, the one that sends it
/// (`ParsedURL` in HTTP, SPEC §5.3). It lives here, with the header field rules, because Config
/// and HTTP are siblings that cannot import each other.
public struct URLSyntax: Sendable, Equatable {
    /// The scheme, lower-cased (`https`).
    public let scheme: String
    /// Whether an authority (`//...`) follows the scheme.
    public let hasAuthority: Bool
    /// Whether the authority has user information (`user:password@`).
    public let hasUserInfo: Bool
    /// The host as written (an IP literal keeps its brackets); empty when there is none.
    public let host: String
    /// The port digits as written, if a `:` follows the host.
    public let port: String?
    /// The path as written (may be empty).
    public let path: String
    /// Whether a `?` query follows.
    public let hasQuery: Bool
    /// Whether a `#` fragment follows.
    public let hasFragment: Bool

    /// Splits `text`; `nil` when it has no valid scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" /
    /// "." ) ":"`), a bracketed host without its `]`, or a port that is not digits.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0, ASCII.isLetter(bytes[0]),
            bytes[1..<colon].allSatisfy({ ASCII.isLetter($0) || ASCII.isDigit($0) || "+-.".utf8.contains($0) })
        else { return nil }
        scheme = String(decoding: bytes[0..<colon].map(Self.lowercased), as: UTF8.self)
        var index = colon + 1
        let slash = UInt8(ascii: "/")
        hasAuthority = bytes.count >= index + 2 && bytes[index] == slash && bytes[index + 1] == slash
        if hasAuthority {
            index += 2
            let end =
                bytes[index...].firstIndex(where: { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
                ?? bytes.endIndex
            var authority = bytes[index..<end]
            if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
                hasUserInfo = true
                authority = authority[(at + 1)...]
            } else {
                hasUserInfo = false
            }
            let hostEnd: Int
            if authority.first == UInt8(ascii: "[") {
                guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
                hostEnd = close + 1
            } else {
                hostEnd = authority.firstIndex(of: UInt8(ascii: ":")) ?? authority.endIndex
            }
            host = String(decoding: authority[authority.startIndex..<hostEnd], as: UTF8.self)
            let rest = authority[hostEnd...]
            if rest.isEmpty {
                port = nil
            } else {
                guard rest.first == UInt8(ascii: ":"), rest.dropFirst().allSatisfy(ASCII.isDigit) else { return nil }
                port = String(decoding: rest.dropFirst(), as: UTF8.self)
            }
            index = end
        } else {
            hasUserInfo = false
            host = ""
            port = nil
        }
        let pathEnd =
            bytes[index...].firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
            ?? bytes.endIndex
        path = String(decoding: bytes[index..<pathEnd], as: UTF8.self)
        let fragment = bytes[pathEnd...].firstIndex(of: UInt8(ascii: "#"))
        hasQuery = pathEnd < bytes.endIndex && bytes[pathEnd] == UInt8(ascii: "?")
        hasFragment = fragment != nil
    }

    /// Whether an OAuth endpoint (issuer, token, authorization, device authorization) with this
    /// syntax may be used: HTTPS, or plain HTTP on the loopback interface (SPEC §5.2). The one
    /// rule for `check-config`'s diagnostics and the advisory check when a session registers;
    /// the decision before sending is made again on libcurl's parse.
    public var isAllowedEndpoint: Bool {
        scheme == "https" || (scheme == "http" && Self.isLoopback(host: host))
    }

    /// Whether `host` (as written, or as libcurl reports it: an IP literal in brackets) names the
    /// loopback interface: `localhost` (and `*.localhost`, which libcurl resolves to loopback
    /// itself), 127.0.0.0/8, `::1` and IPv4-mapped 127.0.0.0/8. A name with a trailing dot
    /// (`localhost.`, `127.0.0.1.`) is not: libcurl and the C library send it to DNS, which may
    /// answer anything.
    public static func isLoopback(host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if name.hasPrefix("["), name.hasSuffix("]") {
            let literal = String(name.dropFirst().dropLast())
            var address = in6_addr()
            guard inet_pton(AF_INET6, literal, &address) == 1 else { return false }
            let bytes = withUnsafeBytes(of: address) { Array($0) }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
            let mapped = bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF
            return mapped && bytes[12] == 127
        }
        var address = in_addr()
        guard inet_pton(AF_INET, name, &address) == 1 else { return false }
        return withUnsafeBytes(of: address) { $0[0] } == 127
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}
