import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayAuth
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTPFields
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
@_spi(Testing) import TokenRelayServer

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

    /// The command `arguments` name (their first word unless it is an option; else `""`, which
    /// runs `serve`) and the arguments after it.
    static func command(of arguments: [String]) -> (name: String, rest: [String]) {
        guard let first = arguments.first, !first.hasPrefix("-") else { return ("", arguments) }
        return (first, Array(arguments.dropFirst()))
    }

    /// Runs `command` (see ``command(of:)``) with the arguments after it (where its work runs:
    /// ``Placement``).
    static func run(
        _ command: String, arguments: [String], environment: [String: String]
    ) async -> Int32 {
        if arguments.contains("--version") || command == "version" {
            print("tokenrelay \(RelayServer.version)")
            return ExitCodes.success
        }
        if arguments.contains("--help") || arguments.contains("-h") || command == "help" {
            print(
                command.isEmpty ? CommandHelp.global : CommandHelp.text(command: command, arguments: arguments),
                terminator: "")
            return ExitCodes.success
        }
        switch command {
        case "__openrpc":
            // Hidden: the OpenRPC document for scripts/gen-openrpc (the source of schemas/openrpc.json).
            writeRaw(STDOUT_FILENO, Array(OpenRPCDocument.text.utf8))
            return ExitCodes.success
        case "__man":
            // Hidden: the man page scripts/install writes (tokenrelay.1), from the command table.
            writeRaw(STDOUT_FILENO, Array(CommandDocuments.manPage.utf8))
            return ExitCodes.success
        case "__completions":
            // Hidden: the completion script scripts/install writes for a shell, from the command table.
            guard arguments.count == 1, let script = CommandDocuments.completion(for: arguments[0]) else {
                return usageError("__completions takes bash, zsh or fish")
            }
            writeRaw(STDOUT_FILENO, Array(script.utf8))
            return ExitCodes.success
        case "", "serve":
            return await serve(arguments: arguments, environment: environment)
        case "mcp":
            // The MCP face (SPEC §8): the same server, config, store and sessions; MCP methods
            // on newline-delimited JSON (the MCP stdio transport).
            return await serve(arguments: arguments, environment: environment, mcp: true)
        case "subscribe":
            // Ends on a signal by closing its stream (its own handlers), then exits 0.
            return await SubscribeCommand.run(arguments: arguments, environment: environment)
        case "store":
            return await SessionCommands.store(arguments: arguments, environment: environment)
        case "mcp-proxy":
            // A long-running stdio server like `serve`; a login it starts is its own.
            return await MCPProxyCommand.run(arguments: arguments, environment: environment)
        case "exec":
            // A program's lifetime: its signals are forwarded to it, its exit status is exec's.
            return await ExecCommand.run(arguments: arguments, environment: environment)
        default:
            break
        }
        guard let oneShot = oneShot(command, arguments: arguments, environment: environment)
        else {
            var message = "unknown command '\(command)'"
            if let guess = ValueSyntax.suggestion(for: command, among: CommandTable.topLevelNames) {
                message += "; did you mean '\(guess)'?"
            }
            return usageError(message)
        }
        return await interruptible(oneShot)
    }

    /// Runs a one-shot command so that a signal (SIGTERM, SIGINT, SIGQUIT, SIGHUP) never loses a
    /// token request it already sent (SPEC §5.2). Until the command sends one, the signals keep
    /// their default actions (the command ends at once, as curl does; nothing to lose, and no
    /// thread is started for them). Just before its first token request goes out
    /// (``TokenRequestWatch``), the command takes them over: a signal then cancels the command;
    /// whatever has not been sent stops at once, while a renewal or login already at the token
    /// endpoint runs to completion and its answer (a rotated refresh token) is committed, bounded
    /// by that request's own timeout, as the command's runtime closes. Then the process still ends
    /// by the signal. Before, the default action ended the process in the middle of the exchange,
    /// and the next process sent the spent refresh token (issue 34, finding 2).
    static func interruptible(_ command: @escaping @Sendable () async -> Int32) async
        -> Int32
    {
        let interruption = Interruption()
        TokenRequestWatch.beforeFirstRequest { interruption.takeOverSignals() }
        let task = Placement.task { await command() }
        interruption.attach(task)
        let code = await task.value
        guard let number = interruption.signal else { return code }
        ProcessSetup.end(bySignal: number)
        return 128 + number
    }

    /// The one-shot command `command` names (run through ``interruptible(_:)``); `nil`
    /// for an unknown one.
    private static func oneShot(
        _ command: String, arguments: [String], environment: [String: String]
    ) -> (@Sendable () async -> Int32)? {
        switch command {
        case "call": { await CallCommand.run(arguments: arguments, environment: environment) }
        case "token": { await TokenCommand.run(arguments: arguments, environment: environment) }
        case "status":
            { await SessionCommands.status(arguments: arguments, environment: environment) }
        case "logout":
            { await SessionCommands.logout(arguments: arguments, environment: environment) }
        case "invalidate":
            { await SessionCommands.invalidate(arguments: arguments, environment: environment) }
        case "login": { await LoginCommand.run(arguments: arguments, environment: environment) }
        case "check-config":
            {
                // Its parser lives in the Config module; the table's parser refuses what the table lacks.
                do throws(ArgumentError) {
                    var parser = ArgumentParser(arguments, for: "check-config")
                    while let argument = try parser.next() {
                        if parser.takesValue(argument) { _ = try parser.value(for: argument) }
                    }
                } catch {
                    return usageError(error.message, command: "check-config")
                }
                return await CheckConfigCommand.run(
                    arguments: arguments, environment: environment,
                    standardOutput: { writeStandardOutput($0) }, standardError: { writeStandardError($0) })
            }
        default: nil
        }
    }

    /// Prints a usage error (with `command`'s usage line, or the list of commands) and returns
    /// ``ExitCodes/usage``.
    static func usageError(_ message: String, command: String? = nil) -> Int32 {
        if let command, let spec = CommandTable.command(command) {
            writeStandardError(
                "tokenrelay: \(message)\nUsage: \(CommandHelp.usageLine(spec))\n"
                    + "See 'tokenrelay \(command) --help' for its options.")
        } else {
            writeStandardError("tokenrelay: \(message)\n\n\(CommandHelp.global)")
        }
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

    /// The grace period of a stopping stdio server (`serve`, `mcp`, `mcp-proxy`): 10 s, or, in
    /// test builds only (as the test methods), `TOKENRELAY_TEST_GRACE_MS`, so that the
    /// grace-expiry tests do not wait the full 10 s.
    static func gracePeriod(environment: [String: String]) -> Duration {
        if environment["TOKENRELAY_ENABLE_TEST_METHODS"] == "1", let text = environment["TOKENRELAY_TEST_GRACE_MS"],
            let milliseconds = Int(text), milliseconds >= 0
        {
            return .milliseconds(milliseconds)
        }
        return ServerOptions().gracePeriod
    }

    /// `tokenrelay serve`, and `tokenrelay mcp` (`mcp`: the MCP face; no `--framing`).
    static func serve(
        arguments: [String], environment: [String: String], mcp: Bool = false
    ) async -> Int32 {
        var parser = ArgumentParser(arguments, for: mcp ? "mcp" : "serve")
        var options = ServerOptions()
        options.mcp = mcp
        if mcp { options.framing = .ndjson }
        var logLevel = LogLevel.info
        var logFormat = LogFormat.text
        var configPath: String?
        var environmentName: String?
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                switch argument {
                case "--config": configPath = try parser.value(for: argument)
                case "--env": environmentName = try parser.value(for: argument)
                case "--framing" where !mcp:
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
                    throw ArgumentError("unknown argument '\(argument)'")
                }
            }
        } catch {
            return usageError(error.message, command: mcp ? "mcp" : "serve")
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
            Placement.task { await server.reloadOnSignal() }
        }
        defer { withExtendedLifetime(hangupSource) {} }
        options.testMethods = environment["TOKENRELAY_ENABLE_TEST_METHODS"] == "1"
        options.testLeaseGate = environment["TOKENRELAY_TEST_LEASE_GATE"]
        options.gracePeriod = gracePeriod(environment: environment)

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

/// The first stopping signal a one-shot command received, and the command's task it cancels.
private final class Interruption: Sendable {
    private struct State {
        var signal: Int32?
        var task: Task<Int32, Never>?
        /// The signal sources, once taken over; kept alive until the process ends.
        var sources: [any DispatchSourceSignal]?
    }

    /// Guarded by the mutex.
    private let state = Mutex(State())

    /// Takes the stopping signals over (once): from now on they cancel the command.
    func takeOverSignals() {
        state.withLock { state in
            guard state.sources == nil else { return }
            state.sources = ProcessSetup.onSignals(ProcessSetup.stopping + ProcessSetup.reloading) { [self] number in
                receive(number)
            }
        }
    }

    /// A signal arrived (on a dispatch queue): the first one cancels the command; later ones
    /// change nothing.
    private func receive(_ number: Int32) {
        let task: Task<Int32, Never>? = state.withLock { state in
            guard state.signal == nil else { return nil }
            state.signal = number
            return state.task
        }
        log.debug(
            "\(ProcessSetup.name(of: number)) received: stopping once the token request already sent is committed")
        task?.cancel()
    }

    /// The command's task, once started (cancelled at once if a signal came first).
    func attach(_ task: Task<Int32, Never>) {
        let cancelNow = state.withLock { state in
            state.task = task
            return state.signal != nil
        }
        if cancelNow { task.cancel() }
    }

    /// The signal received, if any.
    var signal: Int32? { state.withLock { $0.signal } }
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

/// Walks the arguments of one command of ``CommandTable``; `--name=value` and `--name value` are
/// both accepted. An option the command's table entry does not list is refused here, so a command
/// cannot take an option its `--help`, man page and completions do not name.
struct ArgumentParser {
    private var remaining: [String]
    private var pendingValue: String?
    /// The command's table entry.
    let command: CommandSpec

    /// A parser for the command named `command` in ``CommandTable`` (one missing from the table
    /// takes no options).
    init(_ arguments: [String], for command: String) {
        remaining = arguments
        self.command = CommandTable.command(command) ?? CommandSpec(command, summary: "", options: [])
    }

    /// The next option (as spelled) or positional argument; throws for an option the command does
    /// not take, or a value given to a flag.
    mutating func next() throws(ArgumentError) -> String? {
        guard !remaining.isEmpty else { return nil }
        var argument = remaining.removeFirst()
        pendingValue = nil
        guard argument.hasPrefix("-"), argument != "-" else { return argument }
        if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
            pendingValue = String(argument[argument.index(after: equals)...])
            argument = String(argument[..<equals])
        }
        guard let option = command.option(named: argument) else {
            var message = "unknown option '\(argument)' for \(command.name)"
            if let guess = ValueSyntax.suggestion(for: argument, among: command.options.flatMap(\.names)) {
                message += "; did you mean '\(guess)'?"
            }
            throw ArgumentError(message)
        }
        if option.value == nil, pendingValue != nil { throw ArgumentError("\(argument) takes no value") }
        return argument
    }

    /// Whether the option spelled `name` takes a value.
    func takesValue(_ name: String) -> Bool { command.option(named: name)?.value != nil }

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
