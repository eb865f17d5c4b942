// libFuzzer target for the request heads `tokenrelay exec`'s endpoint reads from its child (SPEC
// §12): the head parser, the resolution of its target, and a chunked body after the head. Build and run from the package root
// (scripts/fuzz does this):
//   swift build -c release --product FuzzRequestHead -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       -Xswiftc -enable-testing --scratch-path /tmp/fuzz-head
//   /tmp/fuzz-head/release/FuzzRequestHead -max_total_time=20 Tests/Fuzz/request-head-corpus
// A plain build replays the files named on its command line.

import FuzzSupport
import TokenRelayHTTP

@testable import TokenRelayServer

/// What one way of feeding the input produced; every way must produce the same.
struct FuzzOutcome: Equatable {
    var head: HTTPRequestHead?
    /// Bytes of the input after the head (the body's first bytes).
    var rest: Int?
    var error: HTTPRequestHeadError?
}

/// Feeds `chunks` to a fresh parser with small bounds (so the bound paths are reached).
func run(_ chunks: [ArraySlice<UInt8>]) -> FuzzOutcome {
    var parser = HTTPRequestHeadParser(maximumHeadBytes: 512, maximumFields: 8)
    var outcome = FuzzOutcome()
    var remaining = chunks.reduce(0) { $0 + $1.count }
    do {
        for chunk in chunks {
            remaining -= chunk.count
            if let (head, consumed) = try parser.feed(chunk) {
                precondition(consumed <= chunk.count, "consumed more than the chunk")
                outcome.head = head
                outcome.rest = chunk.count - consumed + remaining
                return outcome
            }
        }
    } catch {
        outcome.error = error
    }
    return outcome
}

/// What a chunked body decodes to when fed `chunks`: the data, bytes left after it, or a refusal.
func decodeChunked(_ chunks: [ArraySlice<UInt8>]) -> [UInt8]? {
    var decoder = ChunkedBodyDecoder()
    var output: [UInt8] = []
    var left = 0
    do {
        for chunk in chunks {
            if decoder.isComplete {
                left += chunk.count
                continue
            }
            left += chunk.count - (try decoder.feed(chunk, into: &output))
        }
    } catch {
        return nil
    }
    return output + [decoder.isComplete ? 1 : 0] + Array(String(left).utf8)
}

/// The first byte picks where the rest is split in two; the rest is the request. One chunk, two
/// chunks and one-byte chunks must give the same head, error and body offset; an accepted head
/// holds only what the endpoint may act on; a resolved target never holds a dot segment or an
/// encoded slash. A difference is a bug: the harness crashes on purpose so libFuzzer records it.
@Sendable func fuzzRequestHead(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    let stream = bytes[1...]
    let position = stream.startIndex + stream.count * Int(bytes[0]) / 255
    let whole = run([stream])
    let halves = run([stream[..<position], stream[position...]])
    precondition(halves == whole, "two chunks split at \(position - 1) differ from one chunk")
    if stream.count <= 1024 {
        let bytewise = run(stream.indices.map { stream[$0...$0] })
        precondition(bytewise == whole, "one-byte chunks differ from one chunk")
    }
    guard let head = whole.head else { return }
    precondition(head.method != "CONNECT", "CONNECT accepted")
    precondition(head.target.hasPrefix("/") && !head.target.hasPrefix("//"), "a target that is not a path accepted")
    precondition(head.headers.values(for: "host").count == 1, "a head without exactly one Host accepted")
    for field in head.headers {
        precondition(
            !field.name.isEmpty && !field.value.utf8.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F },
            "a field with a control character accepted")
    }
    if case .chunked = head.body, let rest = whole.rest {
        precondition(!head.headers.contains("content-length"), "chunked with a Content-Length accepted")
        // The body after the head, through the chunked decoder: whole and byte by byte agree.
        let body = Array(stream.suffix(rest))
        precondition(
            decodeChunked([body[...]]) == decodeChunked(body.indices.map { body[$0...$0] }), "chunkings differ")
    }
    guard case .success(let target) = ExecTarget.resolve(head.target, served: ["e", "github"]) else { return }
    let path = target.path.description
    for segment in target.path.segments {
        precondition(segment != "." && segment != "..", "a dot segment resolved: \(path)")
        precondition(!segment.uppercased().contains("%2F"), "an encoded slash resolved: \(path)")
        precondition(!segment.contains("/") && !segment.contains("\\"), "a slash inside a segment: \(path)")
    }
    precondition(["e", "github"].contains(target.environment), "an environment not served")
}

@main
enum FuzzRequestHead {
    static func main() { FuzzDriver.run(fuzzRequestHead) }
}
