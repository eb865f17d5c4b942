/// Text an outside server controls (an OAuth `error` or `error_description`, a challenge
/// parameter, a name in a discovery document, a device login's user code, an ID token's claims),
/// or an agent does (what the MCP face shows a person when it asks for consent, and writes in its
/// audit lines), in the only form tokenrelay copies into its own results, errors, notifications,
/// log lines, prompts and terminal output (SPEC §5.3): control characters (C0, DEL, C1),
/// bidirectional formatting characters, invisible formatting characters and line or paragraph
/// separators replaced by spaces, every secret the redactor knows masked, then cut to at most
/// ``maximumBytes`` bytes of UTF-8 on a character boundary.
///
/// It is made safe once, where the text is taken from the response; every output then uses
/// ``value`` as it is, and types that carry such text to an output hold a `ServerText`, not a
/// `String`, so that nothing reaches a person or a peer without passing here. Response bodies and
/// headers of `request` results are the caller's data and never go through this type.
public struct ServerText: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The bound on ``value``, in UTF-8 bytes.
    public static let maximumBytes = 256

    /// The cleaned text.
    public let value: String

    /// Cleans `raw`: unsafe characters (``containsUnsafeCharacter(_:)``) become spaces,
    /// `redactor`'s secrets are masked (before cutting, so a secret is never cut into an unmasked
    /// prefix), and the result is cut to `maximumBytes` bytes without splitting a character.
    public init(_ raw: some StringProtocol, maximumBytes: Int = ServerText.maximumBytes, redactor: Redactor = .shared) {
        let cleaned = Self.replacingControlCharacters(String(raw))
        value = Self.prefix(redactor.redact(cleaned), maximumBytes: maximumBytes)
    }

    /// Whether `text` holds a character the cleaner replaces: a C0 control, DEL, a C1 control
    /// (U+0080–U+009F), a bidirectional formatting character (U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069), an invisible formatting character (the soft hyphen U+00AD,
    /// the zero-width U+200B–U+200D, U+2060–U+2064, U+206A–U+206F, the byte order mark U+FEFF,
    /// the tag characters U+E0000–U+E007F, which can spell out text a person does not see, and the
    /// variation selectors U+FE00–U+FE0F and U+E0100–U+E01EF, which can carry hidden bytes) or a
    /// line or paragraph separator (U+2028, U+2029). Text that must be used as it is (a URL shown
    /// to a person) is refused when this is true.
    public static func containsUnsafeCharacter(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var index = 0
            while index < bytes.count {
                if unsafeLength(bytes, at: index) > 0 { return true }
                index += 1
            }
            return false
        }
    }

    /// The UTF-8 length of the unsafe character starting at `index` of `bytes` (valid UTF-8), or 0.
    /// A C1 control is `C2 80`...`C2 9F`, U+00AD `C2 AD`, U+061C `D8 9C`, U+FEFF `EF BB BF`, a
    /// variation selector `EF B8 80`...`EF B8 8F` or `F3 A0 84 xx`...`F3 A0 87 xx`, a tag
    /// character `F3 A0 80 xx` / `F3 A0 81 xx`, the others `E2 80 xx` / `E2 81 xx`; no other
    /// character's encoding holds those bytes in that order.
    @inline(__always)
    static func unsafeLength(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int {
        let byte = bytes[index]
        if byte < 0x20 || byte == 0x7f { return 1 }
        guard byte == 0xc2 || byte == 0xd8 || byte == 0xe2 || byte == 0xef || byte == 0xf3, index + 1 < bytes.count
        else { return 0 }
        let second = bytes[index + 1]
        switch byte {
        case 0xc2: return second <= 0x9f || second == 0xad ? 2 : 0
        case 0xd8: return second == 0x9c ? 2 : 0
        case 0xef:
            guard second == 0xbb || second == 0xb8, index + 2 < bytes.count else { return 0 }
            let third = bytes[index + 2]
            return (second == 0xbb && third == 0xbf) || (second == 0xb8 && (0x80...0x8f).contains(third)) ? 3 : 0
        case 0xf3:
            guard second == 0xa0, index + 3 < bytes.count else { return 0 }
            let third = bytes[index + 2]
            let selector = (0x84...0x86).contains(third) || (third == 0x87 && bytes[index + 3] <= 0xaf)
            return third == 0x80 || third == 0x81 || selector ? 4 : 0
        default:
            guard index + 2 < bytes.count else { return 0 }
            let third = bytes[index + 2]
            if second == 0x80, (0x8b...0x8f).contains(third) || (0xa8...0xae).contains(third) { return 3 }
            if second == 0x81, (0xa0...0xa4).contains(third) || (0xa6...0xaf).contains(third) { return 3 }
            return 0
        }
    }

    /// `raw` with every unsafe character (``containsUnsafeCharacter(_:)``) replaced by one space.
    /// Works on the UTF-8 bytes of a `String` rather than any `StringProtocol` (unspecialised
    /// across modules, each byte went through witness tables): appending scalar by scalar cost ~430
    /// instructions each, ~35k for one libcurl error message.
    static func replacingControlCharacters(_ raw: String) -> String {
        var raw = raw
        return raw.withUTF8 { bytes in
            String(unsafeUninitializedCapacity: bytes.count) { cleaned in
                var count = 0
                var index = 0
                while index < bytes.count {
                    let length = unsafeLength(bytes, at: index)
                    if length > 0 {
                        cleaned[count] = 0x20
                        index += length
                    } else {
                        cleaned[count] = bytes[index]
                        index += 1
                    }
                    count += 1
                }
                return count
            }
        }
    }

    /// A literal of our own (tests, fixed codes); cleaned like any other text.
    public init(stringLiteral value: String) {
        self.init(value)
    }

    public var description: String { value }

    /// The longest prefix of `text` of at most `maximumBytes` UTF-8 bytes that ends on a
    /// `Character` boundary (a base letter is never separated from its combining marks).
    public static func prefix(_ text: String, maximumBytes: Int) -> String {
        guard text.utf8.count > maximumBytes else { return text }
        var end = text.startIndex
        var used = 0
        for index in text.indices {
            let next = text.index(after: index)
            let size = text.utf8.distance(from: index, to: next)
            guard used + size <= maximumBytes else { break }
            used += size
            end = next
        }
        return String(text[..<end])
    }
}
