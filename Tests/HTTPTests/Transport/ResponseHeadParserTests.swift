import Testing

@testable import TokenRelayHTTP

@Suite struct ResponseHeadParserTests {
    func feed(_ lines: [String]) -> (ResponseHeadParser, completions: Int) {
        var parser = ResponseHeadParser()
        var completions = 0
        for line in lines {
            let bytes = Array(line.utf8)
            if bytes.withUnsafeBufferPointer({ parser.consume(line: $0) }) { completions += 1 }
        }
        return (parser, completions)
    }

    @Test func keepsOnlyTheLastResponseAfterInterim1xx() {
        let (parser, completions) = feed([
            "HTTP/1.1 100 Continue\r\n", "X-Interim: 1\r\n", "\r\n",
            "HTTP/1.1 201 Created\r\n", "Location: /a\r\n", "set-cookie: a=1\r\n", "Set-Cookie: b=2\r\n", "\r\n",
        ])
        #expect(parser.status == 201)
        #expect(completions == 1)
        #expect(parser.fields.map(\.name) == ["location", "set-cookie", "set-cookie"])
        #expect(HTTPHeaders(parser.fields).values(for: "set-cookie") == ["a=1", "b=2"])
    }

    @Test func parsesHTTP2StatusTrimsValuesAndJoinsFoldedLines() {
        let (parser, _) = feed([
            "HTTP/2 404\r\n", "x-a:   spaced value \t\r\n", "X-Folded: one\r\n", "  two\r\n", "\r\n",
        ])
        #expect(parser.status == 404)
        #expect(parser.fields.map(\.value) == ["spaced value", "one two"])
    }

    @Test func ignoresTrailersAndMalformedLines() {
        let (parser, completions) = feed([
            "HTTP/1.1 200 OK\n", "no colon here\n", ": empty name\n", "A: 1\n", "\n", "Trailer: x\n", "\n",
        ])
        #expect(completions == 1)
        #expect(parser.fields.map(\.name) == ["a"])
    }

    @Test func lowerCasesNamesOnTheirASCIILettersOnly() {
        // Not Unicode case mapping: the Kelvin sign stays (it would lower-case to `k`), and
        // invalid UTF-8 is repaired as in the values.
        let (parser, _) = feed(["HTTP/1.1 200 OK\r\n", "X-Mixed_Case-09[]: 1\r\n", "\u{212A}ey: 2\r\n", "\r\n"])
        #expect(parser.fields.map(\.name) == ["x-mixed_case-09[]", "\u{212A}ey"])
        var parser2 = ResponseHeadParser()
        let invalid: [UInt8] = [0x58, 0xFF, 0x3A, 0x20, 0x31, 0x0D, 0x0A]
        _ = [UInt8]("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBufferPointer { parser2.consume(line: $0) }
        _ = invalid.withUnsafeBufferPointer { parser2.consume(line: $0) }
        #expect(parser2.fields.map(\.name) == ["x\u{FFFD}"])
    }
}

@Suite struct FieldNameComparisonTests {
    @Test func namesCompareCaseInsensitivelyOnASCIILettersOnly() {
        #expect("Content-Type".caseInsensitiveEquals("content-TYPE"))
        #expect(
            "x-a-long-field-name-beyond-the-small-string-size".caseInsensitiveEquals(
                "X-A-LONG-FIELD-NAME-BEYOND-THE-SMALL-STRING-SIZE"))
        #expect(!"content-type".caseInsensitiveEquals("content-typf"))
        #expect(!"content-type".caseInsensitiveEquals("content-typ"))
        // `@` and `` ` `` differ only in bit 0x20, as do `[` and `{`: not letters, not equal.
        #expect(!"a@".caseInsensitiveEquals("a`"))
        #expect(!"[".caseInsensitiveEquals("{"))
        // Not Unicode case folding, and not canonical equivalence: bytes or nothing.
        #expect(!"\u{212A}".caseInsensitiveEquals("k"))
        #expect(!"\u{E9}".caseInsensitiveEquals("e\u{301}"))
        let bridgedLike = String(decoding: Array("Set-Cookie".utf8), as: UTF8.self)
        #expect(HTTPHeaders([(name: bridgedLike, value: "a=1")])["set-cookie"] == "a=1")
    }
}
