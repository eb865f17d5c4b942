import Config
import ErrorKinds
import FoundationEssentials
import Glibc
import HTTPFields
import JSONRPC
import Logging
import Relay
import Synchronization

/// Parses the command line and runs the chosen command; returns the exit code.
enum CommandLineTool {
    /// Prints a failed command's error and returns its exit code (``ExitCodes/code(for:in:)``).
    static func fail(_ error: RPCError, in command: ExitCodes.Command, prefix: String = "") -> Int32 {
        fail(kind: error.kind, message: error.message, in: command, prefix: prefix)
    }

    /// Prints a failure of `kind` and returns the exit code `command` gives it.
    static func fail(kind: ErrorKind, message: String, in command: ExitCodes.Command, prefix: String = "") -> Int32 {
        writeStandardError("tokenrelay: \(prefix)\(kind.rawValue): \(message)")
        return ExitCodes.code(for: kind, in: command)
    }

    static let usage = """
        Usage:
          tokenrelay [serve] [--config PATH] [--env NAME] [--framing auto|ndjson|lsp]
                     [--log-level error|warn|info|debug|trace] [--log-format text|json]
          tokenrelay check-config [--config PATH] [--json] [--resolve-secrets]
          tokenrelay call METHOD PATH [--env E] [--profile P] [-H 'K: V']... [--query k=v]...
                     [--json BODY | --data TEXT] [-v]
          tokenrelay subscribe PATH [--env E] [--profile P] [--last-event-id ID]
          tokenrelay token [--env E] [--profile P] [--format raw|header|json|exec-credential]
                     [--min-valid 60s]
          tokenrelay token --format git get|store|erase [--env E] [--profile P] [--min-valid 60s]
          tokenrelay login [--env E] [--profile P] [--no-browser]
          tokenrelay mcp-proxy URL | --env E [--profile P] [--config PATH] [--browser]
          tokenrelay status [--config PATH] [--env E] [--json]
          tokenrelay logout [--config PATH] [--env E] [--profile P] [--all]
          tokenrelay store new-key
          tokenrelay store rekey [--config PATH] (--new-key-env NAME | --new-key-file PATH)
          tokenrelay --version | --help

        Serves JSON-RPC 2.0 on stdin/stdout (newline-delimited JSON or Content-Length framing,
        detected from the first bytes). Logs go to stderr. See README.md.

        """

    /// The command `arguments` name (their first word unless it is an option; else `serve`) and
    /// the arguments after it.
    static func command(of arguments: [String]) -> (name: String, rest: [String]) {
        guard let first = arguments.first, !first.hasPrefix("-") else { return ("serve", arguments) }
        return (first, Array(arguments.dropFirst()))
    }

    /// Runs `command` (see ``command(of:)``) with the arguments after it; `executor` is where
    /// `serve` runs the requests that need no HTTP loop, and where every command's token manager
    /// runs its own tasks (`nil`: the global executor).
    static func run(
        _ command: String, arguments: [String], environment: [String: String], executor: (any TaskExecutor)? = nil
    ) async -> Int32 {
        if arguments.contains("--version") || command == "version" {
            print("tokenrelay \(RelayServer.version)")
            return ExitCodes.success
        }
        if arguments.contains("--help") || arguments.contains("-h") || command == "help" {
            print(usage, terminator: "")
            return ExitCodes.success
        }
        switch command {
        case "__openrpc":
            // Hidden: the OpenRPC document for scripts/gen-openrpc (the source of schemas/openrpc.json).
            writeRaw(STDOUT_FILENO, Array(OpenRPCDocument.text.utf8))
            return ExitCodes.success
        case "serve":
            return await serve(arguments: arguments, environment: environment, executor: executor)
        case "call":
            return await CallCommand.run(arguments: arguments, environment: environment, executor: executor)
        case "subscribe":
            return await SubscribeCommand.run(arguments: arguments, environment: environment, executor: executor)
        case "token":
            return await TokenCommand.run(arguments: arguments, environment: environment, executor: executor)
        case "status":
            return await SessionCommands.status(arguments: arguments, environment: environment, executor: executor)
        case "logout":
            return await SessionCommands.logout(arguments: arguments, environment: environment, executor: executor)
        case "store":
            return await SessionCommands.store(arguments: arguments, environment: environment)
        case "login":
            return await LoginCommand.run(arguments: arguments, environment: environment, executor: executor)
        case "mcp-proxy":
            return await MCPProxyCommand.run(arguments: arguments, environment: environment, executor: executor)
        case "check-config":
            return await CheckConfigCommand.run(
                arguments: arguments, environment: environment,
                standardOutput: { writeStandardOutput($0) }, standardError: { writeStandardError($0) })
        default:
            return usageError("unknown command '\(command)'")
        }
    }

    static func usageError(_ message: String) -> Int32 {
        writeStandardError("tokenrelay: \(message)\n\(usage)")
        return ExitCodes.usage
    }

    /// Writes to stdout directly (no buffering: the text is out before the process exits).
    static func writeStandardOutput(_ text: String) { writeAll(STDOUT_FILENO, text) }
    /// Writes to stderr directly, after the log lines logged before it.
    static func writeStandardError(_ text: String) {
        log.flush()
        writeAll(STDERR_FILENO, text)
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        if bytes.last != 0x0A { bytes.append(0x0A) }
        writeRaw(fd, bytes)
    }

    /// Writes bytes as they are.
    static func writeRaw(_ fd: Int32, _ bytes: [UInt8]) {
        OutputFile.writeAll(fd, bytes)
    }

    /// Reads the configuration for serving (at start and on every reload).
    static func loadConfig(path: String?, environment: [String: String]) async -> ConfigLoadResult {
        await ConfigLoader().load(path: path, environment: environment, mode: .serve)
    }

    /// Loads the configuration for serving; prints its diagnostics on stderr. `nil` when it
    /// failed to load (the caller exits with ``ExitCodes/config``).
    static func loadSettings(path: String?, environment: [String: String]) async -> Settings? {
        let result = await loadConfig(path: path, environment: environment)
        for diagnostic in result.diagnostics {
            if diagnostic.severity == .error {
                log.error(diagnostic.description)
            } else {
                log.warn(diagnostic.description)
            }
        }
        guard !result.hasErrors, let settings = result.settings else {
            log.error("the configuration has errors; not starting")
            return nil
        }
        return settings
    }

    /// `tokenrelay serve`.
    static func serve(arguments: [String], environment: [String: String], executor: (any TaskExecutor)?) async -> Int32
    {
        var parser = ArgumentParser(arguments)
        var options = ServerOptions()
        options.defaultExecutor = executor
        var logLevel = LogLevel.info
        var logFormat = LogFormat.text
        var configPath: String?
        var environmentName: String?
        do throws(ArgumentError) {
            while let argument = parser.next() {
                switch argument {
                case "--config": configPath = try parser.value(for: argument)
                case "--env": environmentName = try parser.value(for: argument)
                case "--framing":
                    let value = try parser.value(for: argument)
                    switch value {
                    case "auto": options.framing = nil
                    case "ndjson": options.framing = .ndjson
                    case "lsp", "content-length": options.framing = .lsp
                    default: throw ArgumentError("--framing must be auto, ndjson or lsp")
                    }
                case "--log-level":
                    let value = try parser.value(for: argument)
                    guard let level = LogLevel(name: value) else {
                        throw ArgumentError("--log-level must be error, warn, info, debug or trace")
                    }
                    logLevel = level
                case "--log-format":
                    let value = try parser.value(for: argument)
                    guard let format = LogFormat(rawValue: value) else {
                        throw ArgumentError("--log-format must be text or json")
                    }
                    logFormat = format
                default:
                    throw ArgumentError("unknown option '\(argument)'")
                }
            }
        } catch {
            return usageError(error.message)
        }
        log.configure(level: logLevel, format: logFormat)
        // SIGHUP (a service manager's "reload", a closed terminal) reloads the configuration
        // (SPEC §5.7) and never ends the server. Installed before anything slow, so there is no
        // window in which SIGHUP still kills; until the server runs it is logged and ignored.
        let reloadTarget = ReloadTarget()
        let hangupSource = ProcessSetup.onSignals(ProcessSetup.reloading) { number in
            guard let server = reloadTarget.server.withLock({ $0 }) else {
                log.info("\(ProcessSetup.name(of: number)) received before serving: ignored")
                return
            }
            log.info("\(ProcessSetup.name(of: number)) received: reloading the configuration")
            Task { await server.reloadOnSignal() }
        }
        defer { withExtendedLifetime(hangupSource) {} }
        options.testMethods = environment["TOKENRELAY_ENABLE_TEST_METHODS"] == "1"
        options.testLeaseGate = environment["TOKENRELAY_TEST_LEASE_GATE"]
        // Test-only, like the test methods: a shorter drain grace so the grace-expiry tests do not
        // wait the full 10 s.
        if options.testMethods, let text = environment["TOKENRELAY_TEST_GRACE_MS"], let milliseconds = Int(text),
            milliseconds >= 0
        {
            options.gracePeriod = .milliseconds(milliseconds)
        }

        let protocolOutput = ProcessSetup.protectStandardOutput()
        guard let settings = await loadSettings(path: configPath, environment: environment) else {
            return ExitCodes.config
        }
        options.dispatcherLimits = DispatcherLimits(
            maximumConcurrent: settings.server.maxConcurrentRequests, maximumQueued: settings.server.maxQueuedRequests)
        options.framingLimits.maximumMessageBytes = settings.server.maxMessageBytes
        options.loadConfig = { [configPath] in
            await loadConfig(path: configPath, environment: environment)
        }
        let server: RelayServer
        do {
            server = try await RelayServer.make(options: options, settings: settings, environment: environmentName)
        } catch {
            log.error("cannot start: \(ErrorMapping.rpcError(error).message)")
            return ExitCodes.config
        }
        let signalSources = ProcessSetup.onSignals(ProcessSetup.stopping) { number in
            log.debug("\(ProcessSetup.name(of: number)) received: stopping")
            server.terminate(TerminationReason.signal(number))
        }
        reloadTarget.server.withLock { $0 = server }
        let code = await server.run(input: STDIN_FILENO, output: protocolOutput)
        withExtendedLifetime(signalSources) {}
        return code
    }
}

/// The server SIGHUP reloads, once it exists.
private final class ReloadTarget: Sendable {
    /// Guarded by the mutex.
    let server = Mutex<RelayServer?>(nil)
}

/// A usage error in the arguments.
struct ArgumentError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Walks the arguments; `--name=value` and `--name value` are both accepted.
struct ArgumentParser {
    private var remaining: [String]
    private var pendingValue: String?

    init(_ arguments: [String]) { remaining = arguments }

    mutating func next() -> String? {
        guard !remaining.isEmpty else { return nil }
        let argument = remaining.removeFirst()
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            pendingValue = String(argument[argument.index(after: equals)...])
            return String(argument[..<equals])
        }
        pendingValue = nil
        return argument
    }

    mutating func value(for option: String) throws(ArgumentError) -> String {
        if let pendingValue {
            self.pendingValue = nil
            return pendingValue
        }
        guard !remaining.isEmpty else { throw ArgumentError("\(option) needs a value") }
        return remaining.removeFirst()
    }

    /// Positional arguments left.
    var rest: [String] { remaining }

    /// Splits a `-H 'Name: value'` argument.
    static func header(_ text: String) throws(ArgumentError) -> (name: String, value: String) {
        guard let colon = text.firstIndex(of: ":") else { throw ArgumentError("-H takes 'Name: value', got '\(text)'") }
        return (
            HTTPFieldRules.trimmingWhitespace(text[..<colon]),
            HTTPFieldRules.trimmingWhitespace(text[text.index(after: colon)...])
        )
    }
}
