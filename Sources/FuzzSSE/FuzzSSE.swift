// libFuzzer target for the event stream parser. Build and run from the package root:
//   swift build -c release --product FuzzSSE -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING --scratch-path /tmp/fuzz-sse
//   /tmp/fuzz-sse/release/FuzzSSE -max_total_time=20 Tests/Fuzz/sse-corpus
// A plain build replays the files named on its command line.

import FuzzSupport
import TokenRelayHTTP

/// What one way of feeding the input produced; every way must produce the same.
struct FuzzOutcome: Equatable {
    var events: [ServerSentEvent] = []
    var error: ServerSentEventError?
    var lastEventID: String?
    var retry: Int?
    var discarded: Bool?
}

/// Feeds `chunks` to a fresh parser with small limits (so the limit paths are reached), stopping at the first fault.
func run(_ chunks: [ArraySlice<UInt8>]) -> FuzzOutcome {
    var parser = ServerSentEventParser(maxLineLength: 64, maxEventSize: 256)
    var outcome = FuzzOutcome()
    do {
        for chunk in chunks { try parser.feed(chunk, into: &outcome.events) }
        outcome.discarded = parser.finish()
    } catch {
        outcome.error = error
    }
    outcome.lastEventID = parser.lastEventID
    outcome.retry = parser.retry
    return outcome
}

/// The first byte picks where the rest is split in two; the rest is the stream. One chunk, two chunks and one-byte
/// chunks must give identical events, errors and reconnect state; the same split taken as a broken stream and its
/// resumption must carry only the reconnect state (``checkResumption(_:breakingAt:)``). A difference is a bug: the harness crashes on
/// purpose so that libFuzzer records the input.
@Sendable func fuzzSSE(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    let stream = bytes[1...]
    let position = stream.startIndex + stream.count * Int(bytes[0]) / 255
    let whole = run([stream])
    let halves = run([stream[..<position], stream[position...]])
    precondition(halves == whole, "two chunks split at \(position - 1) differ from one chunk")
    if stream.count <= 512 {
        let bytewise = run(stream.indices.map { stream[$0...$0] })
        precondition(bytewise == whole, "one-byte chunks differ from one chunk")
    }
    checkResumption(stream, breakingAt: position)
    for event in whole.events {
        // The limit counts raw bytes; each invalid byte may decode to a 3-byte U+FFFD.
        precondition(event.data.utf8.count <= 3 * 256, "event data larger than the limit")
        precondition(!(event.lastEventID?.contains("\u{0}") ?? false), "last event ID contains NUL")
    }
}

/// The resumption state mcp-proxy keeps across a broken stream and its resumption (one parser,
/// `finish()` at the break): the second connection's events must be exactly what a fresh parser,
/// seeded with the first connection's last event ID, makes of it (nothing of an unfinished
/// event crosses the break), the ID it sends as `Last-Event-ID` is a single header-safe line,
/// and the `retry` delay is the latest either connection named.
func checkResumption(_ stream: ArraySlice<UInt8>, breakingAt position: ArraySlice<UInt8>.Index) {
    let first = stream[..<position]
    let second = stream[position...]
    var carried = ServerSentEventParser(maxLineLength: 64, maxEventSize: 256)
    var events: [ServerSentEvent] = []
    guard (try? carried.feed(first, into: &events)) != nil else { return }
    carried.finish()
    let resumedFrom = carried.lastEventID
    if let id = resumedFrom {
        precondition(
            !id.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\u{0}" }), "a Last-Event-ID that is not one line")
    }
    let retryBefore = carried.retry
    var secondEvents: [ServerSentEvent] = []
    let carriedFailed = (try? carried.feed(second, into: &secondEvents)) == nil
    var fresh = ServerSentEventParser(lastEventID: resumedFrom, maxLineLength: 64, maxEventSize: 256)
    var freshEvents: [ServerSentEvent] = []
    let freshFailed = (try? fresh.feed(second, into: &freshEvents)) == nil
    precondition(carriedFailed == freshFailed, "the resumed stream fails differently from a fresh one")
    precondition(secondEvents == freshEvents, "an unfinished event of the broken stream reached the resumed one")
    if !carriedFailed {
        precondition(carried.lastEventID == fresh.lastEventID, "the resumed stream's last event ID differs")
        precondition(carried.retry == (fresh.retry ?? retryBefore), "the resumed stream's retry delay differs")
    }
}

@main
enum FuzzSSE {
    static func main() { FuzzDriver.run(fuzzSSE) }
}
