import TokenRelayLogging

/// The options the one-shot commands (`call`, `subscribe`, `login`, `token`) share, parsed in
/// one place: `--config PATH`, `--env NAME`, `--profile NAME`, `--log-level LEVEL`.
struct CommandOptions {
    var configPath: String?
    var environment: String?
    var profile: String?
    var logLevel = LogLevel.warn

    /// Consumes `argument` (and its value) when it is a shared option; `false` when it is not.
    mutating func take(_ argument: String, from parser: inout ArgumentParser) throws(ArgumentError) -> Bool {
        switch argument {
        case "--config": configPath = try parser.value(for: argument)
        case "--env": environment = try parser.value(for: argument)
        case "--profile": profile = try parser.value(for: argument)
        case "--log-level":
            let value = try parser.value(for: argument)
            guard let level = LogLevel(name: value) else { throw ArgumentError("unknown log level '\(value)'") }
            logLevel = level
        default: return false
        }
        return true
    }
}
