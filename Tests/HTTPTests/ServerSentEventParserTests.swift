import Testing

@testable import TokenRelayHTTP

/// What parsing a whole stream produced: the events (those before a fault included), the fault, and the state a
/// reconnect would use.
struct ParseOutcome: Equatable, CustomStringConvertible {
    var events: [ServerSentEvent] = []
    var error: ServerSentEventError?
    var lastEventID: String?
    var retry: Int?
    /// What `finish()` reported: whether an unfinished event was discarded (not set after a fault).
    var discardedAtEnd: Bool?

    var description: String {
        "events: \(events.map { "\($0.type)|\($0.data.debugDescription)|\($0.lastEventID ?? "nil")|\($0.retry ?? -1)" })"
            + ", error: \(error.map(String.init(describing:)) ?? "nil"), lastEventID: \(lastEventID ?? "nil")"
            + ", retry: \(retry.map(String.init) ?? "nil"), discardedAtEnd: \(discardedAtEnd.map(String.init) ?? "nil")"
    }
}

/// Parses `chunks` in order with a fresh parser, stopping at the first fault, then finishes the stream.
func parse(_ chunks: [ArraySlice<UInt8>], makeParser: () -> ServerSentEventParser) -> ParseOutcome {
    var parser = makeParser()
    var outcome = ParseOutcome()
    do {
        for chunk in chunks { try parser.feed(chunk, into: &outcome.events) }
        outcome.discardedAtEnd = parser.finish()
    } catch {
        outcome.error = error
    }
    outcome.lastEventID = parser.lastEventID
    outcome.retry = parser.retry
    return outcome
}

/// Splits `bytes` at the given ascending positions.
func split(_ bytes: [UInt8], at positions: [Int]) -> [ArraySlice<UInt8>] {
    var chunks: [ArraySlice<UInt8>] = []
    var start = 0
    for position in positions {
        chunks.append(bytes[start..<position])
        start = position
    }
    chunks.append(bytes[start...])
    return chunks
}

/// Parses `text` in one chunk, checks that every split into two chunks, one-byte chunks and (when asked) every split
/// into three chunks give the same outcome, and returns it.
func parseEveryWay(
    _ bytes: [UInt8], threeWay: Bool = false,
    makeParser: () -> ServerSentEventParser = { ServerSentEventParser() },
    sourceLocation: SourceLocation = #_sourceLocation
) -> ParseOutcome {
    let whole = parse([bytes[...]], makeParser: makeParser)
    for position in 0...bytes.count {
        let outcome = parse(split(bytes, at: [position]), makeParser: makeParser)
        #expect(outcome == whole, "split at \(position)", sourceLocation: sourceLocation)
    }
    let bytewise = parse(bytes.indices.map { bytes[$0...$0] }, makeParser: makeParser)
    #expect(bytewise == whole, "one-byte chunks", sourceLocation: sourceLocation)
    if threeWay {
        var mismatches = 0
        for first in 0...bytes.count {
            for second in first...bytes.count
            where parse(split(bytes, at: [first, second]), makeParser: makeParser) != whole {
                mismatches += 1
            }
        }
        #expect(mismatches == 0, "three-chunk splits that differ", sourceLocation: sourceLocation)
    }
    return whole
}

func parseEveryWay(
    _ text: String, threeWay: Bool = false,
    makeParser: () -> ServerSentEventParser = { ServerSentEventParser() },
    sourceLocation: SourceLocation = #_sourceLocation
) -> ParseOutcome {
    parseEveryWay(Array(text.utf8), threeWay: threeWay, makeParser: makeParser, sourceLocation: sourceLocation)
}

@Suite struct ServerSentEventParserTests {
    // MARK: WHATWG examples

    @Test func stockTickerLinesJoinWithNewlines() {
        let outcome = parseEveryWay("data: YHOO\ndata: +2\ndata: 10\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "YHOO\n+2\n10")])
    }

    @Test func commentIdAndResetBlocksFromTheSpec() {
        let outcome = parseEveryWay(
            ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n")
        #expect(
            outcome.events == [
                ServerSentEvent(data: "first event", lastEventID: "1"),
                ServerSentEvent(data: "second event", lastEventID: nil),
                ServerSentEvent(data: " third event", lastEventID: nil),
            ])
        #expect(outcome.lastEventID == nil)
    }

    @Test func emptyDataFieldsDispatchEmptyOrNewlineDataAndUnendedBlockIsDiscarded() {
        let outcome = parseEveryWay("data\n\ndata\ndata\n\ndata:")
        #expect(outcome.events == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        #expect(outcome.discardedAtEnd == true)
    }

    @Test func oneSpaceAfterTheColonIsIgnored() {
        let outcome = parseEveryWay("data:test\n\ndata: test\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "test"), ServerSentEvent(data: "test")])
    }

    @Test func eventFieldSetsTheTypeOfItsBlockOnly() {
        let outcome = parseEveryWay(
            "event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\ndata: plain\n\nevent: add\ndata: 113411\n\n")
        #expect(
            outcome.events == [
                ServerSentEvent(type: "add", data: "73857293"), ServerSentEvent(type: "remove", data: "2153"),
                ServerSentEvent(type: "message", data: "plain"), ServerSentEvent(type: "add", data: "113411"),
            ])
    }

    // MARK: Line endings and chunking

    @Test(arguments: ["\n", "\r\n", "\r"])
    func everyLineEndingGivesTheSameEvents(ending: String) {
        let lines = [": c", "event: a", "data: 1", "data: 2", "id: 9", "", "data", "", "retry: 50", "data: x", ""]
        let outcome = parseEveryWay(lines.joined(separator: ending) + ending)
        #expect(
            outcome.events == [
                ServerSentEvent(type: "a", data: "1\n2", lastEventID: "9"), ServerSentEvent(data: "", lastEventID: "9"),
                ServerSentEvent(data: "x", lastEventID: "9", retry: 50),
            ])
    }

    @Test func mixedLineEndingsInOneStream() {
        let outcome = parseEveryWay("data: a\r\ndata: b\rdata: c\n\r\n\rdata: d\r\r")
        #expect(outcome.events == [ServerSentEvent(data: "a\nb\nc"), ServerSentEvent(data: "d")])
    }

    @Test func crThenLfInTheNextChunkIsOneLineEnding() {
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        #expect(throws: Never.self) {
            try parser.feed(Array("data: a\r".utf8), into: &events)
            try parser.feed([UInt8](), into: &events)  // an empty chunk between them changes nothing
            try parser.feed(Array("\ndata: b\r\n\r".utf8), into: &events)
            try parser.feed(Array("\n".utf8), into: &events)
        }
        #expect(events == [ServerSentEvent(data: "a\nb")])
    }

    @Test func everySplitOfAMixedStreamGivesIdenticalResults() {
        let stream =
            "\u{FEFF}: comment\r\nretry: 250\r\nevent: update\r\ndata: caf\u{E9} \u{20AC}\u{1F600}\rdata:two\n"
            + "id: 41\r\n\r\nid: 42\ndata\n\nunknown: x\nevent\n:\ndata:  spaced\r\rid:\r\ndata: tail\r\n"
        let outcome = parseEveryWay(stream, threeWay: true)
        #expect(
            outcome.events == [
                ServerSentEvent(
                    type: "update", data: "caf\u{E9} \u{20AC}\u{1F600}\ntwo", lastEventID: "41", retry: 250),
                ServerSentEvent(data: "", lastEventID: "42"),
                ServerSentEvent(data: " spaced", lastEventID: "42"),
            ])
        #expect(outcome.lastEventID == "42")
        #expect(outcome.retry == 250)
        #expect(outcome.discardedAtEnd == true)
    }

    @Test(arguments: [UInt8(0x0A), 0x0D])
    func lineBreakIsFoundAtEveryOffsetAmongNearMissBytes(lineBreak: UInt8) {
        // Bytes close to CR and LF (and with the high bit set) must not end a line, wherever the break falls in a word.
        let nearMisses: [UInt8] = [0x09, 0x0B, 0x0C, 0x0E, 0x1A, 0x1D, 0x8A, 0x8D, 0x4A, 0xFF, 0x00, 0x01]
        for length in 0..<40 {
            let value = (0..<length).map { nearMisses[$0 % nearMisses.count] }
            let stream = Array("data:".utf8) + value + [lineBreak, lineBreak] + Array("data: z\n\n".utf8)
            let outcome = parse([stream[...]]) { ServerSentEventParser() }
            let expected = String(decoding: value, as: UTF8.self)
            #expect(
                outcome.events == [ServerSentEvent(data: expected), ServerSentEvent(data: "z")], "length \(length)")
        }
    }

    // MARK: Byte order mark

    @Test func leadingByteOrderMarkIsSkipped() {
        let outcome = parseEveryWay("\u{FEFF}data: x\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "x")])
    }

    @Test func streamWithoutByteOrderMarkParsesTheSame() {
        #expect(parseEveryWay("data: x\n\n").events == [ServerSentEvent(data: "x")])
    }

    @Test func byteOrderMarkSplitAcrossThreeChunksIsSkipped() {
        let outcome = parse([[0xEF], [0xBB], [0xBF], Array("data: x\n\n".utf8)[...]]) { ServerSentEventParser() }
        #expect(outcome.events == [ServerSentEvent(data: "x")])
    }

    @Test func secondByteOrderMarkIsNotStripped() {
        // The second BOM becomes part of the field name, which is then unknown.
        let outcome = parseEveryWay("\u{FEFF}\u{FEFF}data: x\n\ndata: y\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "y")])
    }

    @Test func byteOrderMarkAfterTheStartIsData() {
        let outcome = parseEveryWay("data: a\n\n\u{FEFF}data: b\n\ndata: \u{FEFF}c\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "a"), ServerSentEvent(data: "\u{FEFF}c")])
    }

    @Test func partialByteOrderMarkIsDataNotSkipped() {
        let outcome = parseEveryWay([0xEF, 0xBB] + Array("\ndata: x\n\n".utf8) + [0xEF, 0xBB, 0x0A])
        #expect(outcome.events == [ServerSentEvent(data: "x")])
        let asField = parseEveryWay([0xEF, 0xBB] + Array("data: x\n\n".utf8))
        #expect(asField.events.isEmpty)  // "\u{FFFD}data" is an unknown field
    }

    // MARK: Fields

    @Test func idContainingNulIsIgnored() {
        let outcome = parseEveryWay("id: 1\n\nid: 2\u{0}3\ndata: x\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "x", lastEventID: "1")])
        #expect(outcome.lastEventID == "1")
    }

    @Test(arguments: ["id", "id:", "id: "])
    func emptyIdResetsTheLastEventID(emptyID: String) {
        let outcome = parseEveryWay("id: 5\ndata: a\n\n\(emptyID)\ndata: b\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "a", lastEventID: "5"), ServerSentEvent(data: "b")])
        #expect(outcome.lastEventID == nil)
    }

    @Test func idIsCommittedByABlankLineEvenWithoutData() {
        let outcome = parseEveryWay("id: 7\n\n: keep-alive\n\n")
        #expect(outcome.events.isEmpty)
        #expect(outcome.lastEventID == "7")
    }

    @Test func idOfAnUnendedBlockIsNotCommitted() {
        let outcome = parseEveryWay("id: 1\ndata: a\n\nid: 2\ndata: b\n")
        #expect(outcome.events == [ServerSentEvent(data: "a", lastEventID: "1")])
        #expect(outcome.lastEventID == "1")
        #expect(outcome.discardedAtEnd == true)
    }

    @Test func retryIsReportedWithItsEventAndKeptByTheParser() {
        let outcome = parseEveryWay("retry: 1500\ndata: a\n\ndata: b\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "a", retry: 1500), ServerSentEvent(data: "b")])
        #expect(outcome.retry == 1500)
    }

    @Test func retryInABlockWithoutDataStillSetsTheReconnectionTime() {
        let outcome = parseEveryWay("retry: 2000\n\ndata: x\n\nretry: 0300\n")
        #expect(outcome.events == [ServerSentEvent(data: "x")])
        #expect(outcome.retry == 300)
    }

    @Test(arguments: [
        "retry: 12a", "retry: -1", "retry:", "retry", "retry: ", "retry:  100", "retry: 1.5", "retry: +5", "retry: 5 ",
        "retry: \u{FF11}", "retry: 99999999999999999999999",
    ])
    func invalidRetryValuesAreIgnored(line: String) {
        let outcome = parseEveryWay("retry: 10\n\n\(line)\ndata: x\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "x")])
        #expect(outcome.retry == 10)
    }

    @Test func unknownFieldsAndNearMissesAreIgnored() {
        let outcome = parseEveryWay("foo: bar\nDATA: up\ndata : sp\n data: lead\nEvent: e\ndata: x\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "x")])
    }

    @Test func fieldWithoutColonHasAnEmptyValue() {
        let outcome = parseEveryWay("event: a\nevent\ndata\n\n")
        #expect(outcome.events == [ServerSentEvent(type: "message", data: "")])
    }

    @Test func valueKeepsLaterColons() {
        let outcome = parseEveryWay("data: a: b:c\n\n")
        #expect(outcome.events == [ServerSentEvent(data: "a: b:c")])
    }

    @Test func commentsAloneDispatchNothing() {
        let outcome = parseEveryWay(": one\n:\n: two\n\n:three\n\n")
        #expect(outcome.events.isEmpty)
        #expect(outcome.discardedAtEnd == false)
    }

    @Test func eventTypeOfABlockWithoutDataIsForgotten() {
        let outcome = parseEveryWay("event: a\n\ndata: x\n\n")
        #expect(outcome.events == [ServerSentEvent(type: "message", data: "x")])
    }

    @Test(arguments: ["data: x", "data: x\n", "data: x\r", "event: a\ndata: x\r\n"])
    func dataWithoutAClosingBlankLineIsDiscardedAtEnd(stream: String) {
        let outcome = parseEveryWay(stream)
        #expect(outcome.events.isEmpty)
        #expect(outcome.discardedAtEnd == true)
    }

    @Test func invalidUTF8BecomesReplacementCharacters() {
        let bytes: [UInt8] =
            Array("data: ".utf8) + [0xFF, 0x41, 0xE2, 0x82] + Array("\ndata: ".utf8) + [0xC0, 0x80, 0xED, 0xA0, 0x80]
            + Array("\nevent: ".utf8) + [0xF0, 0x9F] + Array("\n\n".utf8)
        let outcome = parseEveryWay(bytes)
        #expect(
            outcome.events == [
                ServerSentEvent(
                    type: "\u{FFFD}", data: "\u{FFFD}A\u{FFFD}\n\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}")
            ])
    }

    @Test func seededLastEventIDIsCarriedUntilTheStreamSetsOne() {
        let outcome = parseEveryWay("data: a\n\nid: 8\ndata: b\n\n") { ServerSentEventParser(lastEventID: "7") }
        #expect(
            outcome.events == [
                ServerSentEvent(data: "a", lastEventID: "7"), ServerSentEvent(data: "b", lastEventID: "8"),
            ])
    }

    @Test func finishPreparesTheParserForTheNextConnection() throws {
        var parser = ServerSentEventParser()
        let before = try parser.feed(Array("retry: 40\nid: 3\ndata: a\n\nid: 4\ndata: lost\r".utf8))
        #expect(before == [ServerSentEvent(data: "a", lastEventID: "3", retry: 40)])
        let discarded = parser.finish()
        #expect(discarded)
        #expect(parser.lastEventID == "3")
        #expect(parser.retry == 40)
        let events = try parser.feed(Array("\u{FEFF}\ndata: b\n\n".utf8))  // the CR before does not pair with this LF
        #expect(events == [ServerSentEvent(data: "b", lastEventID: "3")])
        let discardedAgain = parser.finish()
        #expect(!discardedAgain)
    }

    @Test func descriptionLeavesOutTheData() {
        let text = String(describing: ServerSentEvent(type: "t", data: "secret-value", lastEventID: "1", retry: 5))
        #expect(!text.contains("secret-value"))
        #expect(text.contains("12 bytes"))
    }
}
