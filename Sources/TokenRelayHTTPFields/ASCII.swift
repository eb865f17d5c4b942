/// Classes of single ASCII bytes, for the parsers that work on UTF-8 bytes (URLs, config values):
/// a byte of a multi-byte UTF-8 sequence is never in one.
public enum ASCII {
    /// `A`–`Z` or `a`–`z`.
    @inlinable public static func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }

    /// `0`–`9`.
    @inlinable public static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
