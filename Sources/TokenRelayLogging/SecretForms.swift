import FoundationEssentials

/// The forms of a secret the ``Redactor`` masks besides its own bytes, so that an API that echoes
/// a credential encoded (a form body, a base64 field, a re-encoded `Basic` value) cannot hand it
/// over (SPEC §8, docs/agents.md).
///
/// - **Percent-encoded** (any mix of encoded and plain bytes, upper- or lower-case hex): not a
///   pattern but a view: ``percentDecoded(_:)`` decodes the text's `%XX` escapes and the
///   matcher runs over that too, so every spelling that decodes to the secret is masked. Form
///   encoding's `+` for a space is the one extra pattern (``forms(of:)``), for secrets with a space.
/// - **Base64 and base64url**, padded or not, standalone or inside a longer base64 value (a
///   `user:secret` `Basic` credential, a base64'd JSON document): a secret inside a base64 stream
///   starts at one of three byte offsets within a 3-byte group; for each, the groups made of
///   secret bytes only encode to a fixed string (its *middle*) whatever surrounds it. Each middle
///   is a pattern, widened when found over the base64 characters next to it that still carry
///   bits of the secret (2 or 3 on each side), so no bit of the secret is left visible. Middles
///   shorter than ``minimumMiddleLength`` characters are not used (they would mask chance text):
///   secrets of at least 8 bytes are masked at every offset, 6–7 bytes at some.
///
/// Not matched: base64 broken by line breaks (MIME), hex, UTF-16, encryption or hashing of any kind.
enum SecretForms {
    /// One pattern the matcher looks for, and how far past it a match is widened over base64
    /// characters (bytes of the text the pattern's encoding shares with the secret's neighbours).
    struct Form: Hashable {
        var bytes: [UInt8]
        var widenLeft: UInt8 = 0
        var widenRight: UInt8 = 0
    }

    /// The shortest base64 middle used, in characters (6 bytes of the secret).
    static let minimumMiddleLength = 8

    /// `secret` and the forms of it to look for (see the type's description), without duplicates.
    static func forms(of secret: [UInt8]) -> [Form] {
        var forms: [Form] = [Form(bytes: secret)]
        if secret.contains(0x20) {
            forms.append(Form(bytes: secret.map { $0 == 0x20 ? UInt8(ascii: "+") : $0 }))
        }
        // The characters of a group that carry bits of 0, 1 or 2 secret bytes at its edge.
        let edge: [UInt8] = [0, 2, 3]
        for skip in 0..<3 where secret.count > skip {
            let groups = (secret.count - skip) / 3
            guard groups * 4 >= minimumMiddleLength else { continue }
            let middle = secret[skip..<(skip + groups * 3)]
            let left = edge[skip]
            let right = edge[secret.count - skip - groups * 3]
            // Whole groups: no padding, so the standard and URL alphabets differ only in `+/`, `-_`.
            let standard = Array(Data(middle).base64EncodedString().utf8)
            forms.append(Form(bytes: standard, widenLeft: left, widenRight: right))
            let url = standard.map {
                $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0
            }
            if url != standard { forms.append(Form(bytes: url, widenLeft: left, widenRight: right)) }
        }
        return forms
    }

    /// Whether `byte` is a character of either base64 alphabet (what a widened match may cover).
    static func isBase64Character(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "-"),
            UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// The text with its `%XX` escapes decoded, and for each decoded byte the offset in `text`
    /// where it starts (plus one final entry: `text.count`); `nil` when the text has no escape.
    static func percentDecoded(_ text: UnsafeBufferPointer<UInt8>) -> (bytes: [UInt8], origins: [Int])? {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        guard var position = text.firstIndex(of: UInt8(ascii: "%")) else { return nil }
        var bytes: [UInt8] = []
        var origins: [Int] = []
        var found = false
        bytes.reserveCapacity(text.count)
        origins.reserveCapacity(text.count + 1)
        for index in 0..<position {
            bytes.append(text[index])
            origins.append(index)
        }
        while position < text.count {
            origins.append(position)
            if text[position] == UInt8(ascii: "%"), position + 2 < text.count,
                let high = hex(text[position + 1]), let low = hex(text[position + 2])
            {
                bytes.append(high << 4 | low)
                position += 3
                found = true
            } else {
                bytes.append(text[position])
                position += 1
            }
        }
        guard found else { return nil }
        origins.append(text.count)
        return (bytes, origins)
    }
}
