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
/// chunks must give identical events, errors and reconnect state. A difference is a bug: the harness crashes on
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
    for event in whole.events {
        // The limit counts raw bytes; each invalid byte may decode to a 3-byte U+FFFD.
        precondition(event.data.utf8.count <= 3 * 256, "event data larger than the limit")
        precondition(!(event.lastEventID?.contains("\u{0}") ?? false), "last event ID contains NUL")
    }
}

@main
enum FuzzSSE {
    static func main() { FuzzDriver.run(fuzzSSE) }
}
