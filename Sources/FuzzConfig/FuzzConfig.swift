// libFuzzer target: YAML text -> settings, in check mode with no secret resolution (no
// command runs, no file outside memory is read). Build and run:
//   swift build -c release --product FuzzConfig -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       --scratch-path /tmp/fuzz-config-build
//   mkdir -p /tmp/fuzz-config-work && /tmp/fuzz-config-build/release/FuzzConfig -max_total_time=20 \
//       /tmp/fuzz-config-work Tests/Fuzz/config-corpus   # new inputs go to the first folder
// A plain build gives a tool that decodes the files named on its command line (to replay a crash).
import Config

/// A runner that never runs anything: the fuzzer must not spawn processes.
struct RefusingCommandRunner: SecretCommandRunner {
    func run(argv: [String], environment: [String: String], timeout: Duration) async throws(SecretCommandError)
        -> [UInt8]
    {
        throw .emptyCommand
    }
}

/// Decodes one input; returns how many diagnostics it produced.
func decodeForFuzzing(_ bytes: [UInt8]) -> Int {
    let loader = ConfigLoader(fileSystem: InMemoryFileSystem(), commandRunner: RefusingCommandRunner())
    let (result, _) = loader.decodeStructure(
        bytes: bytes, file: "fuzz.yaml", environment: ["HOME": "/home/fuzz", "SET": "value"],
        mode: .check(resolveSecrets: false))
    for diagnostic in result.diagnostics { _ = diagnostic.rendered }
    return result.diagnostics.count
}

#if FUZZING
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// libFuzzer's entry point for one input.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzConfigTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        _ = decodeForFuzzing(bytes)
        return 0
    }

    /// The process entry point (SwiftPM links executables with `--defsym main=FuzzConfig_main`).
    @_cdecl("FuzzConfig_main")
    public func fuzzConfigMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments, fuzzConfigTestOneInput)
    }
#else
    #if canImport(Glibc)
        import Glibc
    #endif

    /// Without fuzzing: decodes each file named on the command line and prints the diagnostic count.
    @main
    enum FuzzConfig {
        static func main() {
            for path in CommandLine.arguments.dropFirst() {
                guard let bytes = try? LocalFileSystem().contents(atPath: path) else {
                    print("\(path): unreadable")
                    continue
                }
                print("\(path): \(decodeForFuzzing(bytes)) diagnostics")
            }
        }
    }
#endif
