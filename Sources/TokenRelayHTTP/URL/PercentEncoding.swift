/// Byte-level percent-encoding shared by URI templates, query strings and form bodies.
enum PercentEncoding {
    static let hex: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~".
    static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// RFC 3986 reserved: gen-delims and sub-delims.
    static func isReserved(_ byte: UInt8) -> Bool {
        ":/?#[]@!$&'()*+,;=".utf8.contains(byte)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x46, 0x61...0x66: true
        default: false
        }
    }

    /// Appends `%XX` (upper-case hex) for `byte`.
    static func appendEscaped(_ byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "%"))
        output.append(hex[Int(byte >> 4)])
        output.append(hex[Int(byte & 0x0F)])
    }

    /// Encodes every byte of `text`'s UTF-8 except the unreserved ones.
    static func encodeUnreserved(_ text: String) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) { output.append(byte) } else { appendEscaped(byte, to: &output) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes `%XX` triplets (malformed ones stay as they are); `plusIsSpace` for form bodies.
    static func decode(_ text: Substring, plusIsSpace: Bool = false) -> String {
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, isHexDigit(bytes[index + 1]),
                isHexDigit(bytes[index + 2])
            {
                output.append(hexValue(bytes[index + 1]) << 4 | hexValue(bytes[index + 2]))
                index += 3
            } else {
                output.append(plusIsSpace && byte == UInt8(ascii: "+") ? 0x20 : byte)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8 {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        default: byte - 0x61 + 10
        }
    }
}

/// `application/x-www-form-urlencoded` bodies, as the WHATWG URL standard serialises them:
/// bytes other than `*-._` and alphanumerics are `%XX`-encoded, space becomes `+`.
public enum FormEncoding {
    /// Serialises `pairs` in order, e.g. `grant_type=client_credentials&scope=a+b`.
    public static func encode(_ pairs: [(String, String)]) -> String {
        var output: [UInt8] = []
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { output.append(UInt8(ascii: "&")) }
            append(name, to: &output)
            output.append(UInt8(ascii: "="))
            append(value, to: &output)
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Form-encodes one name or value (space as `+`).
    public static func encodeComponent(_ text: String) -> String {
        var output: [UInt8] = []
        append(text, to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Parses a form body into pairs (`+` is a space; malformed escapes are kept literally).
    public static func decode(_ body: String) -> [(String, String)] {
        body.split(separator: "&", omittingEmptySubsequences: true).map { part in
            if let equals = part.firstIndex(of: "=") {
                return (
                    PercentEncoding.decode(part[..<equals], plusIsSpace: true),
                    PercentEncoding.decode(part[part.index(after: equals)...], plusIsSpace: true)
                )
            }
            return (PercentEncoding.decode(part, plusIsSpace: true), "")
        }
    }

    private static func append(_ text: String, to output: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"):
                output.append(byte)
            case 0x20: output.append(UInt8(ascii: "+"))
            default: PercentEncoding.appendEscaped(byte, to: &output)
            }
        }
    }
}
