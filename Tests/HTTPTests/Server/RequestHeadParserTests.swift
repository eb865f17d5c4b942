import Testing

@testable import TokenRelayHTTP

/// The request-head parser of `tokenrelay exec`'s endpoint: the same head whatever the chunks,
/// the body's first bytes left to the caller, and every head two readers could read differently
/// refused.
@Suite struct RequestHeadParserTests {
    /// Feeds `text` in chunks of `size` bytes; the head, the body bytes after it, or the error.
    static func parse(_ text: String, chunk size: Int = .max, maximumHeadBytes: Int = 1024) -> Result<
        (HTTPRequestHead, rest: [UInt8]), HTTPRequestHeadError
    >? {
        var parser = HTTPRequestHeadParser(maximumHeadBytes: maximumHeadBytes, maximumFields: 8)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let chunk = bytes[offset..<min(bytes.count, offset + min(size, bytes.count - offset))]
            do {
                if let (head, consumed) = try parser.feed(chunk) {
                    return .success((head, Array(bytes[(offset + consumed)...])))
                }
            } catch {
                return .failure(error)
            }
            offset += chunk.count
        }
        return nil
    }

    static func reason(_ text: String) -> HTTPRequestHeadError.Reason? {
        guard case .failure(let error)? = parse(text) else { return nil }
        return error.reason
    }

    @Test(arguments: [1, 2, 3, 7, 64, Int.max])
    func aHeadParsesTheSameInChunksOfAnySize(size: Int) throws {
        let text =
            "POST /github/repos/a/issues?state=open HTTP/1.1\r\nHost: 127.0.0.1:4000\r\nAuthorization:  Bearer ph \t\r\n"
            + "Content-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\nhello"
        let (head, rest) = try #require(try Self.parse(text, chunk: size)?.get())
        #expect(head.method == "POST")
        #expect(head.target == "/github/repos/a/issues?state=open")
        #expect(head.version == "HTTP/1.1")
        #expect(head.headers["authorization"] == "Bearer ph")
        #expect(head.headers.values(for: "x-a") == ["1", "2"])
        #expect(head.body == .length(5))
        #expect(head.keepAlive)
        #expect(String(decoding: rest, as: UTF8.self) == "hello")
    }

    @Test func anIncompleteHeadIsKeptUntilItsBlankLine() throws {
        var parser = HTTPRequestHeadParser()
        #expect(try parser.feed(Array("GET / HTTP/1.1\r\nHost: h\r\n".utf8)) == nil)
        #expect(parser.hasPartialHead)
        let (head, consumed) = try #require(try parser.feed(Array("\r\nGET".utf8)))
        #expect(head.target == "/" && head.body == .none && consumed == 2)
        #expect(!parser.hasPartialHead)
    }

    @Test func framingFollowsTheFields() throws {
        func body(_ fields: String, version: String = "HTTP/1.1") throws -> HTTPRequestHead.Body {
            try #require(try Self.parse("PUT /e/x \(version)\r\nHost: h\r\n\(fields)\r\n")?.get()).0.body
        }
        #expect(try body("") == .none)
        #expect(try body("Content-Length: 0\r\n") == .none)
        #expect(try body("Content-Length: 12\r\ncontent-length: 12\r\n") == .length(12))
        #expect(try body("Content-Length: 7, 7\r\n") == .length(7))
        #expect(try body("Transfer-Encoding: Chunked\r\n") == .chunked)
    }

    @Test func connectionCloseAndHTTP10EndTheConnection() throws {
        func keepAlive(_ text: String) throws -> Bool { try #require(try Self.parse(text)?.get()).0.keepAlive }
        #expect(try !keepAlive("GET /e HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n"))
        #expect(try !keepAlive("GET /e HTTP/1.0\r\nHost: h\r\n\r\n"))
        #expect(try keepAlive("GET /e HTTP/1.0\r\nHost: h\r\nConnection: keep-alive\r\n\r\n"))
    }

    @Test(arguments: [
        // Not an origin-form target: this is neither a proxy nor a tunnel.
        ("GET http://api.example/x HTTP/1.1\r\nHost: h\r\n\r\n", HTTPRequestHeadError.Reason.notOriginForm),
        ("GET //api.example/x HTTP/1.1\r\nHost: h\r\n\r\n", .notOriginForm),
        ("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", .notOriginForm),
        ("CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n", .connect),
        ("CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", .connect),
        ("GET api.example:443 HTTP/1.1\r\nHost: h\r\n\r\n", .connect),
        // The request line.
        ("GET /x\r\nHost: h\r\n\r\n", .badRequestLine),
        ("GET  /x HTTP/1.1\r\nHost: h\r\n\r\n", .badRequestLine),
        ("G(T /x HTTP/1.1\r\nHost: h\r\n\r\n", .badRequestLine),
        ("GET /x\u{7F} HTTP/1.1\r\nHost: h\r\n\r\n", .badRequestLine),
        ("GET /x HTTP/2.0\r\nHost: h\r\n\r\n", .unsupportedVersion),
        ("GET /x http/1.1\r\nHost: h\r\n\r\n", .badRequestLine),
        ("\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n", .badRequestLine),
        // Line endings and fields that two readers could split differently.
        ("GET /x HTTP/1.1\nHost: h\r\n\r\n", .bareLineEnding),
        ("GET /x HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", .bareLineEnding),
        ("GET /x HTTP/1.1\r\nHost: h\r\nX-A : 1\r\n\r\n", .badField),
        ("GET /x HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n folded\r\n\r\n", .badField),
        ("GET /x HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n", .badField),
        ("GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\u{1}b\r\n\r\n", .badField),
        ("GET /x HTTP/1.1\r\nHost: h\r\nno colon\r\n\r\n", .badField),
        ("GET /x HTTP/1.1\r\n\r\n", .badHost),
        ("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .badHost),
        ("GET /x HTTP/1.1\r\nHost:\r\n\r\n", .badHost),
        // Framing: one length, and chunked alone.
        ("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", .badContentLength),
        ("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\n", .badContentLength),
        ("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", .badContentLength),
        ("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", .badContentLength),
        ("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", .badContentLength),
        (
            "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            .badTransferEncoding
        ),
        ("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .badTransferEncoding),
        ("POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", .badTransferEncoding),
        ("POST /x HTTP/1.0\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", .badTransferEncoding),
        // Bounds.
        ("GET /x HTTP/1.1\r\nHost: h\r\n" + String(repeating: "A: b\r\n", count: 8) + "\r\n", .tooManyFields),
        ("GET /x HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 2000) + "\r\n\r\n", .tooLarge),
    ])
    func malformedOrAmbiguousHeadsAreRefused(text: String, reason: HTTPRequestHeadError.Reason) {
        #expect(Self.reason(text) == reason)
    }

    @Test func aHeadWithoutEndStopsAtTheBoundWhateverTheChunks() {
        let endless = "GET /x HTTP/1.1\r\n" + String(repeating: "X-A: 1\r\n", count: 200)
        for size in [1, 13, Int.max] {
            guard case .failure(let error)? = Self.parse(endless, chunk: size) else {
                Issue.record("an endless head was not refused in chunks of \(size)")
                continue
            }
            #expect(error.reason == .tooLarge && error.status == 431)
        }
    }

    @Test func refusalsNameNoPartOfTheRequest() {
        let canary = "head-canary-93f1"
        for text in [
            "GET /x HTTP/1.1\r\nHost: h\r\nAuthorization : Bearer \(canary)\r\n\r\n",
            "GET http://\(canary)/ HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            guard case .failure(let error)? = Self.parse(text) else {
                Issue.record("not refused")
                continue
            }
            #expect(!error.description.contains(canary))
        }
    }
}
