import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay check-config [--config PATH] [--json] [--resolve-secrets] [--help]`: validates the
/// config and reports every problem. Exit 0 when valid (warnings allowed), 1 when invalid, 2 for
/// a usage error. Never prints a secret.
public enum CheckConfigCommand {
    /// The usage text.
    public static let usage = """
        usage: tokenrelay check-config [--config PATH] [--json] [--resolve-secrets]

        Validates the config file and prints file:line:column diagnostics on stderr.
          --config PATH       the config file (default: $TOKENRELAY_CONFIG, else
                              $XDG_CONFIG_HOME/tokenrelay/config.yaml, else ~/.config/tokenrelay/config.yaml)
          --json              print diagnostics as a JSON array on stdout
          --resolve-secrets   also require every variable and resolve every secret
                              (runs secret commands; values are never printed)
          --help              show this help
        Exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error.

        """

    /// Parsed options.
    struct Options: Equatable {
        var config: String?
        var json = false
        var resolveSecrets = false
        var help = false
    }

    /// Parses the arguments that follow `check-config`.
    static func parse(_ arguments: [String]) -> Result<Options, UsageError> {
        var options = Options()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--json": options.json = true
            case "--resolve-secrets": options.resolveSecrets = true
            case "--help", "-h": options.help = true
            case "--config":
                guard index + 1 < arguments.count, !arguments[index + 1].isEmpty else {
                    return .failure(UsageError(message: "--config needs a path"))
                }
                options.config = arguments[index + 1]
                index += 1
            default:
                if argument.hasPrefix("--config=") {
                    let value = String(argument.dropFirst("--config=".count))
                    guard !value.isEmpty else { return .failure(UsageError(message: "--config needs a path")) }
                    options.config = value
                } else {
                    return .failure(UsageError(message: "unknown argument '\(argument)'"))
                }
            }
            index += 1
        }
        return .success(options)
    }

    /// A command-line mistake.
    struct UsageError: Error, Equatable {
        var message: String
    }

    /// Runs the command with injected environment and output, returning the exit status.
    public static func run(
        arguments: [String], environment: [String: String], standardOutput: (String) -> Void,
        standardError: (String) -> Void, loader: ConfigLoader = ConfigLoader()
    ) async -> Int32 {
        let options: Options
        switch parse(arguments) {
        case .failure(let error):
            standardError("tokenrelay check-config: \(error.message)\n\n" + usage)
            return 2
        case .success(let parsed):
            options = parsed
        }
        if options.help {
            standardOutput(usage)
            return 0
        }
        var loader = loader
        loader.clientKeyCheck = clientKeyCheck
        let result = await loader.load(
            path: options.config, environment: environment, mode: .check(resolveSecrets: options.resolveSecrets))
        if options.json {
            standardOutput(json(result.diagnostics) + "\n")
        } else {
            for diagnostic in result.diagnostics { standardError(diagnostic.renderedWithSeverity + "\n") }
        }
        let file = result.file ?? "config"
        let errors = result.errors.count, warnings = result.warnings.count
        let counts = "\(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")"
        if !options.json {
            standardError(result.hasErrors ? "\(file): invalid (\(counts))\n" : "\(file): valid (\(counts))\n")
        }
        return result.hasErrors ? 1 : 0
    }

    /// `--resolve-secrets` reads every client key and certificate as the token requests will
    /// (SPEC §10): with TokenRelayAuth's code, the requests' own. An error names the setting, where
    /// its value comes from and what is wrong, never the value.
    static let clientKeyCheck: ConfigLoader.ClientKeyCheck = { client, resolved in
        let key = client.clientKey.flatMap { resolved($0.key) }
        let certificate = client.clientCertificate.flatMap(resolved)
        let problems = ClientKeyProblem.problems(
            clientAuth: ProfileRuntime.clientAuth(client.clientAuth), key: key, algorithm: client.clientKey?.algorithm,
            certificate: certificate)
        return problems.compactMap { problem in
            let source = problem.setting == .clientKey ? client.clientKey?.key : client.clientCertificate
            guard let source else { return nil }
            return ConfigDiagnostic(
                file: source.file, mark: source.mark, severity: .error,
                message: "the secret '\(source.keyPath)' from \(source.originDescription): \(problem.reason)")
        }
    }

    /// `[{"file","line","column","severity","message"}, ...]`.
    static func json(_ diagnostics: [ConfigDiagnostic]) -> String {
        let items = diagnostics.map { diagnostic in
            "{\"file\":\(quoted(diagnostic.file)),\"line\":\(diagnostic.line),\"column\":\(diagnostic.column),"
                + "\"severity\":\(quoted(diagnostic.severity.rawValue)),\"message\":\(quoted(diagnostic.message))}"
        }
        return "[" + items.joined(separator: ",") + "]"
    }

    /// A JSON string literal.
    static func quoted(_ text: String) -> String { Logger.quoted(text) }
}
