import Testing

@testable import TokenRelayHTTP

/// The chunked request bodies of `tokenrelay exec`'s endpoint: the same body whatever the chunks,
/// the next request's bytes left alone, malformed framing refused.
@Suite struct ChunkedBodyDecoderTests {
    static func decode(_ text: String, chunk size: Int) throws(ChunkedBodyDecoder.Malformed) -> (
        body: String, rest: String, complete: Bool
    ) {
        var decoder = ChunkedBodyDecoder()
        let bytes = Array(text.utf8)
        var body: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + min(size, bytes.count - offset))
            let used = try decoder.feed(bytes[offset..<end], into: &body)
            if decoder.isComplete {
                return (
                    String(decoding: body, as: UTF8.self), String(decoding: bytes[(offset + used)...], as: UTF8.self),
                    true
                )
            }
            offset = end
        }
        return (String(decoding: body, as: UTF8.self), "", false)
    }

    @Test(arguments: [1, 2, 5, 1000])
    func aBodyDecodesTheSameInChunksOfAnySize(size: Int) throws {
        let text = "5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: t\r\n\r\nGET / HTTP/1.1"
        let (body, rest, complete) = try Self.decode(text, chunk: size)
        #expect(complete)
        #expect(body == "hello, world!!!")
        #expect(rest == "GET / HTTP/1.1")
    }

    @Test func anUnfinishedBodyIsNotComplete() throws {
        #expect(try !Self.decode("5\r\nhel", chunk: 100).complete)
    }

    @Test(arguments: [
        "z\r\nabc\r\n0\r\n\r\n", "\r\n", "5\r\nhelloXX0\r\n\r\n", "5\nhello\r\n0\r\n\r\n", "1234567890abcdef0\r\n",
        "-1\r\n",
    ])
    func malformedFramingIsRefused(text: String) {
        #expect(throws: ChunkedBodyDecoder.Malformed.self) { try Self.decode(text, chunk: 3) }
    }

    @Test func anEndlessSizeLineOrTrailerIsRefused() {
        #expect(throws: ChunkedBodyDecoder.Malformed.self) {
            try Self.decode("5" + String(repeating: ";", count: 5000) + "\r\n", chunk: 64)
        }
        #expect(throws: ChunkedBodyDecoder.Malformed.self) {
            try Self.decode("0\r\n" + String(repeating: "X: y\r\n", count: 4000), chunk: 64)
        }
    }
}
