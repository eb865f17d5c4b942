/// One authentication challenge of a `WWW-Authenticate` field (RFC 7235 §2.1, §4.1).
public struct WWWAuthenticateChallenge: Sendable, Equatable {
    /// The auth-scheme as received (compare case-insensitively, e.g. with ``isScheme(_:)``).
    public var scheme: String
    /// The token68 form of the credentials, when the challenge uses it instead of parameters.
    public var token68: String?
    /// The auth-params in order; names as received, quoted values unescaped.
    public var parameters: [(name: String, value: String)]

    public init(scheme: String, token68: String? = nil, parameters: [(name: String, value: String)] = []) {
        self.scheme = scheme
        self.token68 = token68
        self.parameters = parameters
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.scheme == rhs.scheme && lhs.token68 == rhs.token68
            && lhs.parameters.elementsEqual(rhs.parameters) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Whether the scheme is `name`, ignoring case.
    public func isScheme(_ name: String) -> Bool { scheme.caseInsensitiveEquals(name) }

    /// The value of parameter `name` (case-insensitive), if present.
    public func parameter(_ name: String) -> String? {
        parameters.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Parses every challenge of one field value. Never throws: malformed parts are skipped, so a
    /// hostile header yields fewer challenges, not an error.
    public static func parse(_ field: String) -> [WWWAuthenticateChallenge] {
        var scanner = ChallengeScanner(Array(field.utf8))
        return scanner.challenges()
    }

    /// Parses every challenge of every value of `WWW-Authenticate` in `headers`.
    public static func parse(headers: HTTPHeaders) -> [WWWAuthenticateChallenge] {
        headers.values(for: "WWW-Authenticate").flatMap { parse($0) }
    }

    /// Whether a 401 carries a challenge of one of `schemes` whose `error` is `error` (the
    /// `invalid_token` recovery, RFC 6750 §3.1; a DPoP nonce, RFC 9449 §9).
    public static func isUnauthorized(status: Int, headers: HTTPHeaders, schemes: [String], error: String) -> Bool {
        guard status == 401 else { return false }
        return parse(headers: headers).contains { challenge in
            schemes.contains(where: challenge.isScheme) && challenge.parameter("error") == error
        }
    }
}

/// The RFC 7235 grammar over bytes:
/// `1#challenge`, `challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]`,
/// `auth-param = token BWS "=" BWS ( token / quoted-string )`.
private struct ChallengeScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func challenges() -> [WWWAuthenticateChallenge] {
        var result: [WWWAuthenticateChallenge] = []
        while true {
            skipSeparators()
            guard index < bytes.count else { break }
            let scheme = readToken()
            guard !scheme.isEmpty else {
                skipUntilComma()  // garbage: resynchronise at the next list element
                continue
            }
            var challenge = WWWAuthenticateChallenge(scheme: String(decoding: scheme, as: UTF8.self))
            skipWhitespace()
            if let token68 = readToken68IfPresent() {
                challenge.token68 = token68
            } else {
                readParameters(into: &challenge)
            }
            result.append(challenge)
        }
        return result
    }

    /// Reads `name = value` pairs separated by commas until the next element is a new scheme.
    private mutating func readParameters(into challenge: inout WWWAuthenticateChallenge) {
        while index < bytes.count {
            let save = index
            skipSeparators()
            let name = readToken()
            skipWhitespace()
            guard !name.isEmpty, index < bytes.count, bytes[index] == UInt8(ascii: "=") else {
                index = save  // a new challenge starts here (or the end)
                return
            }
            index += 1
            skipWhitespace()
            let value: String
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                value = readQuotedString()
            } else {
                value = String(decoding: readToken(), as: UTF8.self)
            }
            challenge.parameters.append((String(decoding: name, as: UTF8.self), value))
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ",") else {
                if index < bytes.count { skipUntilComma() }
                continue
            }
        }
    }

    /// A token68 is the only thing after the scheme: `1*(tchar68) *"="` followed by the end or a comma.
    private mutating func readToken68IfPresent() -> String? {
        var probe = index
        while probe < bytes.count, Self.isToken68(bytes[probe]) { probe += 1 }
        guard probe > index else { return nil }
        var end = probe
        while end < bytes.count, bytes[end] == UInt8(ascii: "=") { end += 1 }
        var after = end
        while after < bytes.count, bytes[after] == 0x20 || bytes[after] == 0x09 { after += 1 }
        guard after == bytes.count || bytes[after] == UInt8(ascii: ",") else { return nil }
        let token = String(decoding: bytes[index..<end], as: UTF8.self)
        index = after
        return token
    }

    private mutating func readQuotedString() -> String {
        index += 1  // opening quote
        var value: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\"), index < bytes.count {
                value.append(bytes[index])
                index += 1
            } else {
                value.append(byte)
            }
        }
        return String(decoding: value, as: UTF8.self)
    }

    private mutating func readToken() -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count, Self.isTokenChar(bytes[index]) { index += 1 }
        return bytes[start..<index]
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
    }

    private mutating func skipSeparators() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == UInt8(ascii: ",") {
            index += 1
        }
    }

    /// Skips to the next comma outside a quoted string.
    private mutating func skipUntilComma() {
        while index < bytes.count, bytes[index] != UInt8(ascii: ",") {
            if bytes[index] == UInt8(ascii: "\"") { _ = readQuotedString() } else { index += 1 }
        }
    }

    static func isTokenChar(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    static func isToken68(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"),
            UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
