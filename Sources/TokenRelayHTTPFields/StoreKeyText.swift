/// The one reader of a session store's encryption key as the config gives it (SPEC §5.6): 32
/// bytes written as 64 hex digits, or as base64 (standard or URL-safe alphabet, padded or not),
/// with white space around it ignored (a key file's final newline, a pasted key's spaces).
///
/// `serve` (Auth, when it opens the store) and `check-config --resolve-secrets` (Config) read a
/// key with this same function, so that what one accepts the other accepts. It lives here, with
/// the other syntax shared by Config and Auth, because those two cannot import each other.
public enum StoreKeyText {
    /// The length of a store key, in bytes.
    public static let keyLength = 32

    /// What a config says about a key it cannot read (no value in it).
    public static let requirement = "must be 32 bytes in base64 or hex (tokenrelay store new-key prints one)"

    /// `text` without leading and trailing white space and newlines.
    public static func trimmed(_ text: String) -> String {
        let characters = Array(text)
        guard let first = characters.firstIndex(where: { !$0.isWhitespace }),
            let last = characters.lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(characters[first...last])
    }

    /// The 32 bytes `text` writes, or `nil` when it is not a 32-byte key in hex or base64.
    public static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(trimmed(text).utf8)
        if bytes.count == 2 * keyLength, let decoded = hex(bytes) { return decoded }
        guard let decoded = base64(bytes), decoded.count == keyLength else { return nil }
        return decoded
    }

    private static func hex(_ digits: [UInt8]) -> [UInt8]? {
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index + 1 < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    /// Strict base64: every letter of one alphabet or the other, `=` padding only at the end (to
    /// a multiple of four), no bits left over in the last letter.
    private static func base64(_ letters: [UInt8]) -> [UInt8]? {
        var body = letters[...]
        var padding = 0
        while body.last == UInt8(ascii: "=") {
            body.removeLast()
            padding += 1
        }
        guard padding <= 2, padding == 0 || (body.count + padding) % 4 == 0, body.count % 4 != 1 else {
            return nil
        }
        func value(_ letter: UInt8) -> UInt32? {
            switch letter {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(letter - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(letter - UInt8(ascii: "a") + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(letter - UInt8(ascii: "0") + 52)
            case UInt8(ascii: "+"), UInt8(ascii: "-"): 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): 63
            default: nil
            }
        }
        var out: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for letter in body {
            guard let six = value(letter) else { return nil }
            accumulator = accumulator << 6 | six
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        guard accumulator == 0 else { return nil }  // bits left over: not a canonical encoding
        return out
    }
}
