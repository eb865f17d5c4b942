import Testing

@testable import TokenRelayLogging

@Suite struct ServerTextTests {
    @Test func registeredSecretsAreMaskedBeforeTheTextIsCut() {
        let redactor = Redactor()
        let secret = "canary-secret-0123456789"
        redactor.register(secret)
        // The secret straddles the bound: cut first, its first bytes would escape unmasked.
        let raw = String(repeating: "x", count: 250) + secret
        let text = ServerText(raw, redactor: redactor)
        #expect(!text.value.contains("canary"))
        #expect(text.value.utf8.count <= ServerText.maximumBytes)
        #expect(text.value.hasSuffix("[REDAC"))
    }

    @Test func longTextIsCutTo256BytesOnACharacterBoundary() {
        let raw = String(repeating: "é", count: 200)  // 2 bytes each
        let text = ServerText(raw, redactor: Redactor())
        #expect(text.value.utf8.count == 256)
        let combining = String(repeating: "e\u{0301}", count: 100)  // 3-byte characters
        let cut = ServerText(combining, redactor: Redactor()).value
        #expect(cut.utf8.count == 255)
        #expect(cut.unicodeScalars.last == "\u{0301}")
    }

    @Test func controlCharactersBecomeSpaces() {
        let text = ServerText("a\nb\r\u{0}c\u{7f}d\u{85}e\u{1b}[31m", redactor: Redactor())
        #expect(text.value == "a b  c d e [31m")
        // Every C1 control, at either end; the characters around them (two-byte ones whose lead
        // byte is a C1's, three- and four-byte ones) are kept.
        let c1 = ServerText("\u{80}x\u{9f}\u{a0}é\u{9b}€😀\u{c2}\u{9e}", redactor: Redactor()).value
        #expect(c1 == " x \u{a0}é €😀\u{c2} ")
        #expect(ServerText.replacingControlCharacters("plain text, ünïcödé") == "plain text, ünïcödé")
    }

    @Test func shortTextIsKeptAsItIs() {
        #expect(ServerText("invalid_grant", redactor: Redactor()).value == "invalid_grant")
        #expect(ServerText.prefix("", maximumBytes: 4) == "")
        #expect(ServerText.prefix("abcdef", maximumBytes: 0) == "")
    }
}

@Suite struct ServerTextUnsafeCharacterTests {
    @Test func bidirectionalFormattingAndSeparatorsBecomeSpaces() {
        let raw = "a\u{202E}b\u{2066}c\u{2069}d\u{200F}e\u{061C}f\u{2028}g\u{2029}h\u{202A}"
        #expect(ServerText(raw, redactor: Redactor()).value == "a b c d e f g h ")
        #expect(ServerText.containsUnsafeCharacter(raw))
        // Neighbours of those code points are kept: U+2027, U+202F, U+2065, U+2070, U+061B.
        let kept = "\u{2027}\u{202F}\u{2065}\u{2070}\u{061B}\u{2010}"
        #expect(ServerText(kept, redactor: Redactor()).value == kept)
        #expect(!ServerText.containsUnsafeCharacter(kept))
        #expect(!ServerText.containsUnsafeCharacter("https://as.example/device?code=ABCD-EFGH é"))
        #expect(ServerText.containsUnsafeCharacter("https://as.example/\u{85}"))
        #expect(ServerText.containsUnsafeCharacter("\u{1b}]0;title\u{7}"))
    }

    /// Characters a person does not see (zero-width, invisible operators, the byte order mark,
    /// tag characters that spell hidden text) become spaces; their neighbours are kept.
    @Test func invisibleFormattingCharactersBecomeSpaces() {
        let raw =
            "a\u{200B}b\u{200C}c\u{200D}d\u{2060}e\u{2064}f\u{206F}g\u{FEFF}h\u{AD}i\u{E0041}\u{E007F}j"
        #expect(ServerText(raw, redactor: Redactor()).value == "a b c d e f g h i  j")
        #expect(ServerText.containsUnsafeCharacter("send\u{E0020}x"))
        // Variation selectors carry hidden bytes too (one per byte: U+FE00–FE0F, U+E0100–E01EF).
        #expect(ServerText("x\u{FE00}\u{FE0F}y\u{E0100}\u{E01EF}z", redactor: Redactor()).value == "x  y  z")
        let kept = "\u{200A}\u{2010}\u{2065}\u{FEFE}\u{FFFD}\u{AC}\u{AE}\u{FE10}\u{E01F0}\u{F0000}"
        #expect(ServerText(kept, redactor: Redactor()).value == kept)
        #expect(!ServerText.containsUnsafeCharacter(kept))
    }

    @Test func aLargerBoundKeepsALongURLWhole() {
        let url = "https://as.example/authorize?" + String(repeating: "x", count: 1000)
        #expect(ServerText(url, maximumBytes: 8192, redactor: Redactor()).value == url)
        #expect(ServerText(url, redactor: Redactor()).value.utf8.count == 256)
    }
}
