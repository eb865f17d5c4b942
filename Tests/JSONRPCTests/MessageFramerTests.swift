import Testing

@testable import TokenRelayJSONRPC

@Suite struct MessageFramerTests {
    static let messages = [
        #"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        #"{"jsonrpc":"2.0","id":"é✓","method":"echo","params":{"text":"日本語 – ünïcödé"}}"#,
        #"[{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
    ]

    /// Feeds `input` in chunks of `size` bytes and collects every output.
    static func frame(
        _ input: [UInt8], chunk size: Int, framing: Framing? = nil, limits: FramingLimits = FramingLimits()
    )
        -> (outputs: [FramerOutput], framing: Framing?)
    {
        var framer = MessageFramer(framing: framing, limits: limits)
        var outputs: [FramerOutput] = []
        var index = 0
        while index < input.count {
            let end = min(index + size, input.count)
            outputs += framer.push(input[index..<end])
            index = end
        }
        outputs += framer.finish()
        return (outputs, framer.framing)
    }

    static func lsp(_ bodies: [String], separator: String = "\r\n") -> [UInt8] {
        bodies.flatMap { body in
            Array(
                "Content-Length: \(body.utf8.count)\(separator)Content-Type: application/vscode-jsonrpc; charset=utf-8\(separator)\(separator)\(body)"
                    .utf8)
        }
    }

    @Test func ndjsonMessagesAreSplitIdenticallyAtEveryChunkSize() {
        let input = Array(Self.messages.map { $0 + "\n" }.joined().utf8)
        let expected = Self.messages.map { FramerOutput.message(Array($0.utf8)) }
        for size in 1...input.count {
            let result = Self.frame(input, chunk: size)
            #expect(result.outputs == expected, "chunk size \(size)")
            #expect(result.framing == .ndjson)
        }
    }

    @Test func lspMessagesAreSplitIdenticallyAtEveryChunkSizeCountingUTF8Bytes() {
        for separator in ["\r\n", "\n"] {
            let input = Self.lsp(Self.messages, separator: separator)
            let expected = Self.messages.map { FramerOutput.message(Array($0.utf8)) }
            for size in 1...input.count {
                let result = Self.frame(input, chunk: size)
                #expect(result.outputs == expected, "chunk size \(size)")
                #expect(result.framing == .lsp)
            }
        }
    }

    @Test func crlfLinesBlankLinesAndAFinalLineWithoutNewlineAreAccepted() {
        let input = Array("\r\n{\"a\":1}\r\n\r\n  {\"b\":2}  \n{\"c\":3}".utf8)
        let result = Self.frame(input, chunk: 3)
        #expect(result.outputs == ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"].map { .message(Array($0.utf8)) })
    }

    @Test func garbageFirstLineSelectsNDJSONSoTheStreamContinues() {
        let input = Array("not json\n{\"a\":1}\n".utf8)
        let result = Self.frame(input, chunk: 4)
        #expect(result.framing == .ndjson)
        #expect(result.outputs == [.message(Array("not json".utf8)), .message(Array("{\"a\":1}".utf8))])
    }

    @Test func oversizedNDJSONLineIsReportedOnceAndTheNextLineStillArrives() {
        let limits = FramingLimits(maximumMessageBytes: 16, maximumHeaderBytes: 64)
        let input = Array(("{\"x\":\"" + String(repeating: "a", count: 100) + "\"}\n{\"ok\":1}\n").utf8)
        for size in [1, 7, 50, input.count] {
            let result = Self.frame(input, chunk: size, limits: limits)
            #expect(
                result.outputs == [.error(.messageTooLarge(limit: 16)), .message(Array("{\"ok\":1}".utf8))],
                "chunk \(size)")
        }
    }

    @Test func oversizedLSPBodyIsSkippedAndTheNextMessageStillArrives() {
        let limits = FramingLimits(maximumMessageBytes: 16, maximumHeaderBytes: 64)
        let big = "{\"x\":\"" + String(repeating: "a", count: 40) + "\"}"
        let input = Self.lsp([big, "{\"ok\":1}"])
        for size in [1, 5, input.count] {
            let result = Self.frame(input, chunk: size, limits: limits)
            #expect(result.outputs == [.error(.messageTooLarge(limit: 16)), .message(Array("{\"ok\":1}".utf8))])
        }
    }

    @Test func lspHeaderProblemsAreReportedAndFramingResumes() {
        let input = Array(
            ("Content-Length: abc\r\n\r\nContent-Type: x\r\n\r\nlog line from somewhere\r\nContent-Length: 8\r\n\r\n{\"ok\":1}")
                .utf8)
        let result = Self.frame(input, chunk: 2)
        #expect(
            result.outputs == [
                .error(.invalidContentLength("abc")), .error(.missingContentLength), .message(Array("{\"ok\":1}".utf8)),
            ])
    }

    @Test func oversizedLSPHeaderIsReported() {
        let limits = FramingLimits(maximumMessageBytes: 1024, maximumHeaderBytes: 32)
        let input = Array(("Content-Length: 8\r\nX-Long: " + String(repeating: "h", count: 100) + "\r\n\r\n").utf8)
        let result = Self.frame(input, chunk: 10, limits: limits)
        #expect(result.outputs.first == .error(.headerTooLarge(limit: 32)))
    }

    @Test func anOversizedHeaderLineGivesTheSameOutputsAtEveryChunkSize() {
        // Found by FuzzFraming: a long header line and a blank line after it.
        let limits = FramingLimits(maximumMessageBytes: 4096, maximumHeaderBytes: 256)
        let input = Array(
            ("Content-Length: 40" + String(repeating: "x", count: 300) + "\r\n\r\nContent-Length: 8\r\n\r\n{\"ok\":1}")
                .utf8)
        let whole = Self.frame(input, chunk: input.count, framing: .lsp, limits: limits).outputs
        #expect(whole.first == .error(.headerTooLarge(limit: 256)))
        #expect(whole.last == .message(Array("{\"ok\":1}".utf8)))
        for size in 1..<input.count {
            #expect(Self.frame(input, chunk: size, framing: .lsp, limits: limits).outputs == whole, "chunk \(size)")
        }
    }

    @Test func forcedFramingIsHonoured() {
        let input = Array("{\"a\":1}\n".utf8)
        let result = Self.frame(input, chunk: 100, framing: .lsp)
        #expect(result.framing == .lsp)
        #expect(result.outputs.isEmpty)
    }

    @Test func framesAreWrappedForTheWire() {
        let body = Array("{\"é\":1}".utf8)
        #expect(Framing.ndjson.frame(body) == body + [0x0A])
        #expect(Framing.lsp.frame(body) == Array("Content-Length: \(body.count)\r\n\r\n".utf8) + body)
    }
}
