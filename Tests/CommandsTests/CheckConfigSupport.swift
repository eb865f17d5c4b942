import TokenRelayCommands
import TokenRelayConfig

/// Everything `check-config` printed.
final class CapturedOutput: @unchecked Sendable {
    // Safe: written only by the `run` call that the test awaits, read after it returns.
    var standardOutput = ""
    var standardError = ""
}

/// Runs check-config with captured output.
func runCheckConfig(
    _ arguments: [String], environment: [String: String] = ["HOME": "/home/u"],
    files: InMemoryFileSystem = InMemoryFileSystem(),
    runner: any SecretCommandRunner = ProcessCommandRunner()
) async -> (status: Int32, output: CapturedOutput) {
    let output = CapturedOutput()
    let status = await CheckConfigCommand.run(
        arguments: arguments, environment: environment, standardOutput: { output.standardOutput += $0 },
        standardError: { output.standardError += $0 }, loader: ConfigLoader(fileSystem: files, commandRunner: runner))
    return (status, output)
}
