import TestSupport
import Testing

@testable import TokenRelayConfig

/// The config file path used by in-memory tests; relative paths resolve against `/cfg`.
let testConfigPath = "/cfg/config.yaml"

/// Decodes `yaml` as `/cfg/config.yaml` with injected environment and files.
func decodeConfig(
    _ yaml: String, environment: [String: String] = ["HOME": "/home/u"], mode: ConfigLoadMode = .serve,
    files: InMemoryFileSystem = InMemoryFileSystem(), runner: any SecretCommandRunner = ProcessCommandRunner()
) async -> ConfigLoadResult {
    let loader = ConfigLoader(fileSystem: files, commandRunner: runner)
    return await loader.decode(yaml: yaml, file: testConfigPath, environment: environment, mode: mode)
}

/// A config with one environment `e` whose extra keys are `environment` (4-space indent added);
/// the first extra line is line 5.
func environmentConfig(_ environment: String) -> String {
    let body = environment.split(separator: "\n", omittingEmptySubsequences: false).map { "    " + $0 }.joined(
        separator: "\n")
    return """
        version: 1
        environments:
          e:
            base_url: https://api.example.com
        \(body)

        """
}

/// A command runner that returns fixed output without running anything, and counts calls.
struct FixedCommandRunner: SecretCommandRunner {
    var output: String
    func run(argv: [String], environment: [String: String], timeout: Duration) async throws(SecretCommandError)
        -> [UInt8]
    {
        Array(output.utf8)
    }
}
