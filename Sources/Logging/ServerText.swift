/// Text an outside server controls (an OAuth `error` or `error_description`, a challenge
/// parameter, a name in a discovery document), in the only form tokenrelay copies into its own
/// results, errors, notifications and log lines (SPEC §5.3): control characters replaced by
/// spaces, every secret the redactor knows masked, then cut to at most ``maximumBytes`` bytes of
/// UTF-8 on a character boundary.
///
/// It is made safe once, where the text is taken from the response; every output then uses
/// ``value`` as it is. Response bodies and headers of `request` results are the caller's data and
/// never go through this type.
public struct ServerText: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The bound on ``value``, in UTF-8 bytes.
    public static let maximumBytes = 256

    /// The cleaned text.
    public let value: String

    /// Cleans `raw`: control characters (C0, DEL, C1) become spaces, `redactor`'s secrets are
    /// masked (before cutting, so a secret is never cut into an unmasked prefix), and the result
    /// is cut to ``maximumBytes`` bytes without splitting a character.
    public init(_ raw: some StringProtocol, redactor: Redactor = .shared) {
        let cleaned = Self.replacingControlCharacters(String(raw))
        value = Self.prefix(redactor.redact(cleaned), maximumBytes: Self.maximumBytes)
    }

    /// `raw` with every C0 control, DEL and C1 control replaced by a space. Works on the UTF-8
    /// bytes (a C1 control is the pair `C2 80`...`C2 9F`; no other character's encoding holds
    /// those bytes in that order), of a `String` rather than any `StringProtocol` (unspecialised
    /// across modules, each byte went through witness tables): appending scalar by scalar cost ~430
    /// instructions each, ~35k for one libcurl error message.
    static func replacingControlCharacters(_ raw: String) -> String {
        var raw = raw
        return raw.withUTF8 { bytes in
            String(unsafeUninitializedCapacity: bytes.count) { cleaned in
                var count = 0
                var afterC2 = false
                for byte in bytes {
                    if afterC2, byte <= 0x9f {
                        cleaned[count - 1] = 0x20
                    } else {
                        cleaned[count] = byte < 0x20 || byte == 0x7f ? 0x20 : byte
                        count += 1
                    }
                    afterC2 = byte == 0xc2
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
