import FuzzSupport
// libFuzzer target: YAML text -> settings, in check mode with no secret resolution (no
// command runs, no file outside memory is read). Build and run:
//   swift build -c release --product FuzzConfig -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       --scratch-path /tmp/fuzz-config-build
//   mkdir -p /tmp/fuzz-config-work && /tmp/fuzz-config-build/release/FuzzConfig -max_total_time=20 \
//       /tmp/fuzz-config-work Tests/Fuzz/config-corpus   # new inputs go to the first folder
// A plain build gives a tool that decodes the files named on its command line (to replay a crash).
import TokenRelayConfig

/// A runner that never runs anything: the fuzzer must not spawn processes.
struct RefusingCommandRunner: SecretCommandRunner {
    func run(argv: [String], environment: [String: String], timeout: Duration) async throws(SecretCommandError)
        -> [UInt8]
    {
        throw .emptyCommand
    }
}

/// Decodes one input; returns how many diagnostics it produced.
@discardableResult
@Sendable func decodeForFuzzing(_ bytes: [UInt8]) -> Int {
    let loader = ConfigLoader(fileSystem: InMemoryFileSystem(), commandRunner: RefusingCommandRunner())
    let (result, _) = loader.decodeStructure(
        bytes: bytes, file: "fuzz.yaml", environment: ["HOME": "/home/fuzz", "SET": "value"],
        mode: .check(resolveSecrets: false))
    for diagnostic in result.diagnostics { _ = diagnostic.rendered }
    return result.diagnostics.count
}

@main
enum FuzzConfig {
    static func main() { FuzzDriver.run { decodeForFuzzing($0) } }
}
