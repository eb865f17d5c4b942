import Testing

@testable import HTTP

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
        #expect(parser.fields.map(\.name) == ["Location", "set-cookie", "Set-Cookie"])
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
        #expect(parser.fields.map(\.name) == ["A"])
    }
}
