import FoundationEssentials
import Glibc
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay token`: credential-helper mode (SPEC §4.5). Prints the access token of a profile
/// with `expose_token: true` in the format asked for; `--format git ACTION` speaks git's
/// credential-helper protocol on stdin/stdout.
enum TokenCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "token")
        var positional: [String] = []
        var options = CommandOptions()
        var formatName = "raw"
        var minimumValidity: Duration?
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--format": formatName = try parser.value(for: argument)
                case "--min-valid":
                    let text = try parser.value(for: argument)
                    guard let duration = ValueSyntax.duration(text) ?? Int(text).map({ Duration.seconds($0) }),
                        duration >= .zero, duration <= .seconds(86_400)
                    else { throw ArgumentError("--min-valid takes a duration up to 24h, e.g. 60s or 5m") }
                    minimumValidity = duration
                default:
                    if argument.hasPrefix("-") { throw ArgumentError("unknown option '\(argument)'") }
                    positional.append(argument)
                }
            }
            if formatName == "git" {
                guard positional.count == 1 else {
                    throw ArgumentError("--format git takes one action: get, store or erase")
                }
            } else {
                guard TokenFormat(rawValue: formatName) != nil else {
                    throw ArgumentError("--format must be raw, header, json, exec-credential or git")
                }
                guard positional.isEmpty else {
                    throw ArgumentError("token takes no arguments (except with --format git)")
                }
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "token")
        }
        log.configure(level: options.logLevel, format: .text)
        guard let settings = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
        else {
            return ExitCodes.config
        }
        let result: Result<String, RPCError>
        if let format = TokenFormat(rawValue: formatName) {
            result = await OneShot.token(
                settings: settings, environment: options.environment, profile: options.profile, format: format,
                minimumValidity: minimumValidity, execInfo: environment["KUBERNETES_EXEC_INFO"])
        } else {
            result = await OneShot.gitCredential(
                settings: settings, environment: options.environment, profile: options.profile, action: positional[0],
                minimumValidity: minimumValidity,
                input: readStandardInput(limit: GitCredentialRequest.maximumBytes + 1))
        }
        switch result {
        case .success(let text):
            if !text.isEmpty { CommandLineTool.writeRaw(STDOUT_FILENO, Array(text.utf8)) }
            return ExitCodes.success
        case .failure(let error):
            return CommandLineTool.fail(error, in: .token)
        }
    }

    /// Reads stdin to its end, or `limit` bytes (the caller refuses that much).
    private static func readStandardInput(limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes.append(contentsOf: buffer[0..<count])
                // A blank line ends the message (git closes stdin too; a person typing need not).
                let text = "\n" + String(decoding: bytes, as: UTF8.self)
                if text.contains("\n\n") || text.contains("\n\r\n") { break }
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        return bytes
    }
}
