import Foundation
import Testing

@testable import TokenRelayLogging

@Suite struct RedactorTests {
    @Test func aSecretFollowedByACombiningMarkIsStillMasked() {
        let redactor = Redactor()
        redactor.register("s3cret-value")
        let text = "key=s3cret-value\u{0301} end"
        let redacted = redactor.redact(text)
        #expect(!Array(redacted.utf8).containsBytes(Array("s3cret-value".utf8)))
        #expect(redacted == "key=\(Redactor.mask)\u{0301} end")
    }

    @Test func aSecretAfterACombiningMarkOrInsideAGraphemeIsMasked() {
        let redactor = Redactor()
        redactor.register("t0ken")
        #expect(redactor.redact("e\u{0301}t0ken") == "e\u{0301}\(Redactor.mask)")
        #expect(redactor.redact("\u{1F468}\u{200D}t0ken") == "\u{1F468}\u{200D}\(Redactor.mask)")
    }

    @Test func overlappingSecretsAreMaskedAsOneRun() {
        let redactor = Redactor()
        redactor.register("abcdef")
        redactor.register("defghi")
        #expect(redactor.redact("x abcdefghi y") == "x \(Redactor.mask) y")
    }

    @Test func aSecretInsideALongerOneIsMaskedWithTheLongerOne() {
        let redactor = Redactor()
        redactor.register("inner")
        redactor.register("the-inner-secret")
        #expect(redactor.redact("the-inner-secret and inner") == "\(Redactor.mask) and \(Redactor.mask)")
    }

    @Test func secretsSharingTheirLastBytesAreToldApart() {
        // Both keys (last 8 bytes) are equal: the full comparison decides.
        let redactor = Redactor()
        redactor.register("AAAA-common-tail")
        redactor.register("BBBB-common-tail")
        #expect(redactor.redact("CCCC-common-tail") == "CCCC-common-tail")
        #expect(redactor.redact("BBBB-common-tail") == Redactor.mask)
        #expect(redactor.redact("-common-tail") == "-common-tail")
    }

    @Test(arguments: ["secret", "secretsecret", "secret tail", "head secret", "head secret tail"])
    func secretsAtEitherEndOfTheTextAreMasked(text: String) {
        let redactor = Redactor()
        redactor.register("secret")
        let redacted = redactor.redact(text)
        #expect(!redacted.contains("secret"))
        #expect(redacted.contains(Redactor.mask))
    }

    @Test func aPartialSecretAtTheEndOfTheTextIsLeftAlone() {
        let redactor = Redactor()
        redactor.register("secret-value")
        #expect(redactor.redact("ends with secret-val") == "ends with secret-val")
    }

    @Test func valuesShorterThanFourBytesAreNotRegistered() {
        let redactor = Redactor()
        redactor.register("abc")
        redactor.registerToken("xyz")
        #expect(redactor.isEmpty)
        #expect(redactor.redact("abc xyz") == "abc xyz")
        redactor.register("abcd")
        #expect(redactor.redact("abcd") == Redactor.mask)
    }

    @Test func nonASCIISecretsAreMatchedOnTheirBytes() {
        let redactor = Redactor()
        redactor.register("pässwörd")
        #expect(redactor.redact("a pässwörd b") == "a \(Redactor.mask) b")
        // The decomposed spelling is other bytes, another value: left alone.
        #expect(redactor.redact("pa\u{0308}sswo\u{0308}rd") == "pa\u{0308}sswo\u{0308}rd")
    }

    @Test func manySecretsAreAllMasked() {
        let redactor = Redactor(tokenCapacity: 5000)
        let tokens = (0..<3000).map { "tok-\($0)-\(String($0 * 7919, radix: 36))" }
        redactor.registerTokens(tokens)
        for index in stride(from: 0, to: 3000, by: 97) {
            #expect(redactor.redact("a \(tokens[index]) b") == "a \(Redactor.mask) b")
        }
        #expect(redactor.redact("tok-3001-zz") == "tok-3001-zz")
    }

    @Test func tokensBeyondTheCapacityAreForgottenOldestFirstButConfiguredSecretsStay() {
        let redactor = Redactor(tokenCapacity: 3)
        redactor.register("configured-secret")
        redactor.registerTokens(["token-1", "token-2", "token-3"])
        redactor.registerToken("token-1")  // used again: now the most recent
        redactor.registerToken("token-4")  // drops token-2, the least recently used
        #expect(redactor.count == 4)
        #expect(
            redactor.redact("token-1 token-2 token-3 token-4 configured-secret")
                == "\(Redactor.mask) token-2 \(Redactor.mask) \(Redactor.mask) \(Redactor.mask)")
        redactor.registerTokens((5..<100).map { "token-\($0)" })
        #expect(redactor.count == 4)
        #expect(redactor.redact("configured-secret") == Redactor.mask)
    }

    @Test func aTokenThatIsAlsoAConfiguredSecretIsNeverForgotten() {
        let redactor = Redactor(tokenCapacity: 1)
        redactor.register("shared-value")
        redactor.registerTokens(["shared-value", "other-token"])
        redactor.registerToken("newest-token")
        #expect(redactor.redact("shared-value") == Redactor.mask)
    }

    @Test func concurrentRegistrationsAreEachMaskedOnceRegistered() async {
        let redactor = Redactor(tokenCapacity: 10_000)
        await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let token = "concurrent-token-\(index)"
                    redactor.registerToken(token)
                    return redactor.redact(token) == Redactor.mask
                }
            }
            for await masked in group { #expect(masked) }
        }
    }

    @Test func invalidUTF8InTheTextIsKeptAsReplacementCharacters() {
        let redactor = Redactor()
        redactor.register("secret")
        let text = String(decoding: [0xff] + Array("secret".utf8) + [0xfe], as: UTF8.self)
        #expect(redactor.redact(text) == "\u{FFFD}\(Redactor.mask)\u{FFFD}")
    }
}

@Suite struct SecretMatcherTests {
    /// The covered bytes, by a naive search.
    static func naive(_ patterns: [[UInt8]], _ text: [UInt8]) -> [Bool] {
        var covered = [Bool](repeating: false, count: text.count)
        for pattern in patterns where !pattern.isEmpty && pattern.count <= text.count {
            for start in 0...(text.count - pattern.count)
            where text[start..<(start + pattern.count)].elementsEqual(pattern) {
                for index in start..<(start + pattern.count) { covered[index] = true }
            }
        }
        return covered
    }

    @Test func agreesWithANaiveSearchOnGeneratedInputs() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let alphabet = Array("abAB\u{0301}".utf8)
            func byte() -> UInt8 { alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
            let patterns = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                (0..<Int.random(in: 1...12, using: &generator)).map { _ in byte() }
            }
            let text = (0..<Int.random(in: 0...80, using: &generator)).map { _ in byte() }
            let matcher = SecretMatcher(patterns: patterns)
            var covered = [Bool](repeating: false, count: text.count)
            for run in text.withUnsafeBufferPointer({ matcher.matches(in: $0) }) {
                for index in run { covered[index] = true }
            }
            #expect(covered == Self.naive(patterns, text), "patterns \(patterns) text \(text)")
        }
    }
}

extension Array where Element == UInt8 {
    func containsBytes(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}

/// The encoded forms of a secret the redactor masks (SecretForms; docs/agents.md).
@Suite struct EncodedFormsTests {
    /// Its base64 encoding yields both `+` and `/` (standard) or `-` and `_` (URL).
    static let secret = "canary-s3cret?>>~~~ value"

    static func percentEncoded(_ text: String, keeping kept: String, upper: Bool, plus: Bool = false) -> String {
        text.utf8.map { byte -> String in
            if plus, byte == 0x20 { return "+" }
            if kept.utf8.contains(byte) { return String(UnicodeScalar(byte)) }
            let hex = String(byte, radix: 16, uppercase: upper)
            return "%" + (hex.count == 1 ? "0" : "") + hex
        }.joined()
    }

    static let unreserved = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"

    @Test func percentEncodedSpellingsAreMasked() throws {
        let redactor = Redactor()
        redactor.register(Self.secret)
        let spellings = [
            Self.percentEncoded(Self.secret, keeping: "", upper: true),
            Self.percentEncoded(Self.secret, keeping: "", upper: false),
            Self.percentEncoded(Self.secret, keeping: Self.unreserved, upper: true),
            Self.percentEncoded(Self.secret, keeping: Self.unreserved, upper: false),
            Self.percentEncoded(Self.secret, keeping: Self.unreserved, upper: true, plus: true),
            Self.percentEncoded(Self.secret, keeping: Self.unreserved + "?>", upper: false, plus: true),
        ]
        for spelling in spellings {
            let text = "grant_type=x&token=\(spelling)&next=1"
            #expect(redactor.redact(text) == "grant_type=x&token=\(Redactor.mask)&next=1", "\(spelling)")
        }
        // Escapes that decode to something else are kept as they are.
        #expect(redactor.redact("100%25 of %zz and %4") == "100%25 of %zz and %4")
    }

    static func base64(_ bytes: [UInt8], url: Bool, padded: Bool) -> String {
        var text = Data(bytes).base64EncodedString()
        if url { text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_") }
        if !padded { text = text.replacingOccurrences(of: "=", with: "") }
        return text
    }

    /// For the secret at each offset inside a longer base64 value, in both alphabets, padded or
    /// not: one mask, and every character outside it carries only bits of the bytes around.
    @Test(arguments: [false, true], [false, true])
    func base64AtEveryOffsetIsMaskedWithEveryBitOfTheSecret(url: Bool, padded: Bool) throws {
        let redactor = Redactor()
        redactor.register(Self.secret)
        let secret = Array(Self.secret.utf8)
        for before in 0..<6 {
            for after in 0..<4 {
                let value = [UInt8](repeating: 0x78, count: before) + secret + [UInt8](repeating: 0x79, count: after)
                let encoded = Self.base64(value, url: url, padded: padded)
                let redacted = redactor.redact("\"field\":\"\(encoded)\"")
                let parts = redacted.components(separatedBy: Redactor.mask)
                try #require(parts.count == 2, "\(encoded) -> \(redacted)")
                let prefix = String(parts[0].dropFirst("\"field\":\"".count))
                let suffix = String(parts[1].dropLast())
                #expect(encoded.hasPrefix(prefix) && encoded.hasSuffix(suffix))
                // Characters [0, first) carry bits of the leading bytes only; [last, end) of the trailing.
                let first = before * 8 / 6
                let last = ((before + secret.count) * 8 + 5) / 6
                #expect(prefix.count <= first, "\(encoded) -> \(redacted)")
                #expect(encoded.count - suffix.count >= last, "\(encoded) -> \(redacted)")
            }
        }
    }

    @Test func aBasicCredentialOfTheSecretIsMasked() {
        let redactor = Redactor()
        redactor.register(Self.secret)
        for user in ["alice", "bo", "client-id-1"] {
            let basic = Self.base64(Array("\(user):\(Self.secret)".utf8), url: false, padded: true)
            let redacted = redactor.redact("Authorization: Basic \(basic)")
            let parts = redacted.dropFirst("Authorization: Basic ".count).components(separatedBy: Redactor.mask)
            #expect(parts.count == 2, "\(redacted)")
            // What is left shows the user name, never a bit of the secret.
            #expect(basic.hasPrefix(parts[0]) && parts[0].count <= (user.utf8.count + 1) * 8 / 6, "\(redacted)")
        }
    }

    @Test func base64InsidePercentEncodingIsMasked() {
        let redactor = Redactor()
        redactor.register(Self.secret)
        let encoded = Self.base64(Array(Self.secret.utf8), url: false, padded: true)
        let query = Self.percentEncoded(encoded, keeping: Self.unreserved, upper: true)
        #expect(query.contains("%2B") || query.contains("%2F"))
        // The padding carries no bit of the secret (25 bytes: two '=').
        #expect(redactor.redact("?state=\(query)&x=1") == "?state=\(Redactor.mask)%3D%3D&x=1")
    }

    @Test func unrelatedBase64AndShortSecretsAreLeftAlone() {
        let redactor = Redactor()
        redactor.register("abcd")
        let other = Self.base64(Array("an unrelated value of some length".utf8), url: false, padded: true)
        #expect(redactor.redact(other) == other)
        // A 4-byte secret has no base64 middle of 8 characters: only its own bytes are masked.
        #expect(redactor.redact("YWJjZA== abcd") == "YWJjZA== \(Redactor.mask)")
    }

    @Test func theRawPatternMatcherStillMatchesExactlyItsPatterns() {
        let matcher = SecretMatcher(patterns: [Array("secret".utf8)])
        let text = Array("%73ecret c2VjcmV0 secret".utf8)
        #expect(text.withUnsafeBufferPointer { matcher.matches(in: $0) } == [18..<24])
    }
}

/// The stream form of the redactor (`tokenrelay exec`'s responses): a secret split between two
/// chunks is masked whole, whatever the split.
@Suite struct RedactorStreamTests {
    @Test func aSecretSplitAnywhereIsMaskedWhole() {
        let secret = "stream-canary-secret-77af01"
        let redactor = Redactor()
        redactor.register(secret)
        let text = Array("{\"echo\":\"Bearer \(secret)\",\"pad\":\"\(String(repeating: "x", count: 40))\"}\n".utf8)
        for split in 0...text.count {
            var carry: [UInt8] = []
            var output: [UInt8] = []
            for chunk in [Array(text[..<split]), Array(text[split...])] {
                carry += chunk
                let (masked, consumed) = redactor.redact(stream: carry, window: 64, final: false)
                output += masked
                carry.removeFirst(consumed)
            }
            output += redactor.redact(stream: carry, window: 64, final: true).masked
            let result = String(decoding: output, as: UTF8.self)
            #expect(!result.contains(secret) && result.contains("[REDACTED]"), "split at \(split): \(result)")
        }
    }

    @Test func linesGoOutAtOnceAndTheRestWaitsOnlyForTheWindow() {
        let redactor = Redactor()
        redactor.register("stream-canary-other-51c2")
        let (lines, consumed) = redactor.redact(stream: Array("data: 1\n\ndata: 2".utf8), window: 4096, final: false)
        #expect(String(decoding: lines, as: UTF8.self) == "data: 1\n\n" && consumed == 9)
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: 100)
        let (head, used) = redactor.redact(stream: long, window: 30, final: false)
        #expect(head.count == 70 && used == 70)
    }
}
