// libFuzzer target for the stdio framer and message decoding: any bytes, split into chunks at
// positions taken from the input, must frame identically to one whole push, and every frame
// must decode (or be rejected) without crashing. Built by scripts/fuzz with
// `-sanitize=fuzzer -DFUZZING`; otherwise it replays the files named on its command line.
import FuzzSupport
import TokenRelayJSONRPC

enum FuzzFramingTarget {
    @Sendable static func run(_ input: [UInt8]) {
        guard !input.isEmpty else { return }
        let mode: Framing? = [nil, .ndjson, .lsp][Int(input[0]) % 3]
        let limits = FramingLimits(maximumMessageBytes: 4096, maximumHeaderBytes: 256)
        let payload = Array(input.dropFirst())

        var whole = MessageFramer(framing: mode, limits: limits)
        var expected = whole.push(payload)
        expected += whole.finish()

        var chunked = MessageFramer(framing: mode, limits: limits)
        var outputs: [FramerOutput] = []
        var index = 0
        var step = Int(input[0] >> 2) + 1
        while index < payload.count {
            let end = min(payload.count, index + step)
            outputs += chunked.push(payload[index..<end])
            index = end
            step = step % 13 + 1
        }
        outputs += chunked.finish()
        precondition(outputs == expected, "chunking changed the framing result")

        for output in outputs {
            guard case .message(let body) = output else { continue }
            if let value = try? JSONParser.parse(body) {
                let reparsed = try? JSONParser.parse(value.serialized())
                precondition(reparsed == value, "serialization does not round-trip")
                if case .array(let elements) = value {
                    for element in elements { _ = MessageCodec.decode(element) }
                } else {
                    _ = MessageCodec.decode(value)
                }
            }
        }
    }
}

@main
enum FuzzFraming {
    static func main() { FuzzDriver.run(FuzzFramingTarget.run) }
}
