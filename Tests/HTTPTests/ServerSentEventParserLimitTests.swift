import Testing

@testable import TokenRelayHTTP

@Suite struct ServerSentEventParserLimitTests {
    private static func limited(line: Int = 1 << 20, event: Int = 8 << 20) -> () -> ServerSentEventParser {
        { ServerSentEventParser(maxLineLength: line, maxEventSize: event) }
    }

    @Test func lineAtTheLimitIsAccepted() {
        let outcome = parseEveryWay("data: 12\r\n\n", makeParser: Self.limited(line: 8))
        #expect(outcome.error == nil)
        #expect(outcome.events == [ServerSentEvent(data: "12")])
    }

    @Test(arguments: ["data: 123\n\n", ": a long comment\n", "data: 123", "x\ndata: 123\r"])
    func lineOverTheLimitThrowsHoweverTheStreamIsSplit(stream: String) {
        let outcome = parseEveryWay(stream, makeParser: Self.limited(line: 8))
        #expect(outcome.error == .lineTooLong(limit: 8))
    }

    @Test func eventsBeforeAnOverlongLineAreStillDelivered() {
        let stream = "data: a\n\ndata: b\n\ndata: 0123456789\n\ndata: c\n\n"
        let outcome = parseEveryWay(stream, makeParser: Self.limited(line: 8))
        #expect(outcome.events == [ServerSentEvent(data: "a"), ServerSentEvent(data: "b")])
        #expect(outcome.error == .lineTooLong(limit: 8))
    }

    @Test func eventDataAtTheLimitIsAccepted() {
        let outcome = parseEveryWay("data: 12\ndata: 34\n\n", makeParser: Self.limited(event: 5))
        #expect(outcome.events == [ServerSentEvent(data: "12\n34")])
    }

    @Test func eventDataOverTheLimitThrows() {
        let outcome = parseEveryWay("data: ok\n\ndata: 12\ndata: 345\n\n", makeParser: Self.limited(event: 5))
        #expect(outcome.events == [ServerSentEvent(data: "ok")])
        #expect(outcome.error == .eventTooLarge(limit: 5))
    }

    @Test func manyEmptyDataLinesCountTowardsTheEventLimit() {
        let stream = String(repeating: "data\n", count: 12) + "\n"
        #expect(parseEveryWay(stream, makeParser: Self.limited(event: 10)).error == .eventTooLarge(limit: 10))
    }

    @Test func failedParserRethrowsUntilFinished() throws {
        var parser = ServerSentEventParser(maxLineLength: 4)
        #expect(throws: ServerSentEventError.lineTooLong(limit: 4)) { try parser.feed(Array("data: long".utf8)) }
        #expect(throws: ServerSentEventError.lineTooLong(limit: 4)) { try parser.feed(Array("\n\n".utf8)) }
        parser.finish()
        let events = try parser.feed(Array("a\n\n".utf8))
        #expect(events.isEmpty)
    }

    @Test func errorDescriptionsNameTheLimit() {
        #expect(String(describing: ServerSentEventError.lineTooLong(limit: 8)).contains("8 bytes"))
        #expect(String(describing: ServerSentEventError.eventTooLarge(limit: 9)).contains("9 bytes"))
    }
}
