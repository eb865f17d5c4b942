// libFuzzer target for the stdio framer and message decoding: any bytes, split into chunks at
// positions taken from the input, must frame identically to one whole push, and every frame
// must decode (or be rejected) without crashing. Built by scripts/fuzz with
// `-sanitize=fuzzer -DFUZZING`; a plain build gets a stub `main`.
import JSONRPC

enum FuzzFramingTarget {
    static func run(_ bytes: UnsafeBufferPointer<UInt8>) {
        let input = Array(bytes)
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

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
        FuzzFramingTarget.run(UnsafeBufferPointer(start: data, count: size))
        return 0
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> Int32
    ) -> Int32

    @_cdecl("FuzzFraming_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments, fuzzTestOneInput)
    }
#else
    @main
    enum FuzzFraming {
        /// Without libFuzzer: runs the target once per file named on the command line.
        static func main() {
            for path in CommandLine.arguments.dropFirst() {
                guard let file = fopen(path, "rb") else { continue }
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = fread(&buffer, 1, buffer.count, file)
                    if count <= 0 { break }
                    bytes += buffer[0..<count]
                }
                fclose(file)
                bytes.withUnsafeBufferPointer { FuzzFramingTarget.run($0) }
            }
        }
    }
#endif

#if canImport(Glibc)
    import Glibc
#endif
