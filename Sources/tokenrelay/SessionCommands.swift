import FoundationEssentials
import TokenRelayAuth
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay status`, `tokenrelay logout`, `tokenrelay invalidate` and `tokenrelay store new-key|rekey`: the session
/// store seen from a shell, through the same methods `serve` answers.
enum SessionCommands {
    /// `tokenrelay status [--config PATH] [--env E] [--json] [--watch]`.
    static func status(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "status")
        var configPath: String?
        var environmentName: String?
        var json = false
        var watch = false
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                switch argument {
                case "--config": configPath = try parser.value(for: argument)
                case "--env": environmentName = try parser.value(for: argument)
                case "--json": json = true
                case "--watch": watch = true
                default: throw ArgumentError("unknown option '\(argument)'")
                }
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "status")
        }
        log.configure(level: .warn, format: .text)
        guard let settings = await CommandLineTool.loadSettings(path: configPath, environment: environment) else {
            return ExitCodes.config
        }
        if watch { return await watchStatus(settings: settings, environment: environmentName, json: json) }
        switch await OneShot.status(settings: settings, environment: environmentName) {
        case .failure(let error):
            return fail(error)
        case .success(let result):
            if json {
                CommandLineTool.writeStandardOutput(String(decoding: result.serialized(), as: UTF8.self))
            } else {
                CommandLineTool.writeStandardOutput(describe(result))
            }
            // A store that could not be read is a failure of its kind (a refused store: `config`,
            // exit 3), after everything that could be shown was.
            if let error = result["store"]?["error"], let kind = error["kind"]?.stringValue.flatMap(ErrorKind.init) {
                return CommandLineTool.fail(
                    kind: kind, message: error["message"]?.stringValue ?? "the store could not be read", in: .sessions)
            }
            return ExitCodes.success
        }
    }

    /// `status --watch`: every session now, then one line per change until SIGINT/SIGTERM/SIGHUP
    /// (exit 0); JSON lines with `--json` (the `watch-sessions` answer, then each `session-changed`
    /// notification's params).
    static func watchStatus(settings: Settings, environment: String?, json: Bool) async -> Int32 {
        let handle = OneShot.SubscriptionHandle()
        let signalSources = ProcessSetup.onSignals(ProcessSetup.stopping + ProcessSetup.reloading) { _ in
            handle.stop()
        }
        defer { withExtendedLifetime(signalSources) {} }
        let failure = await OneShot.watchSessions(settings: settings, environment: environment, handle: handle) {
            line in
            if json {
                CommandLineTool.writeStandardOutput(line.jsonText)
            } else if let sessions = line["sessions"]?.arrayValue {
                CommandLineTool.writeStandardOutput(describe(["sessions": .array(sessions)]))
            } else {
                CommandLineTool.writeStandardOutput(describeChange(line))
            }
        }
        if let failure { return fail(failure) }
        return ExitCodes.success
    }

    /// One `session-changed` as a line for a person.
    static func describeChange(_ change: JSONValue) -> String {
        var line =
            "\(change["environment"]?.stringValue ?? "?")/\(change["profile"]?.stringValue ?? "?"): "
            + "\(change["reason"]?.stringValue ?? "?") (\(change["state"]?.stringValue ?? "?"))"
        if let expiry = change["expiresAt"]?.stringValue { line += ", expires \(expiry)" }
        if let url = change["login"]?["url"]?.stringValue { line += "; log in at \(url)" }
        if let code = change["login"]?["userCode"]?.stringValue { line += " with code \(code)" }
        return line
    }

    /// The `status` result as lines for a person.
    static func describe(_ result: JSONValue) -> String {
        var lines: [String] = []
        if let store = result["store"]?.objectValue {
            var line = "store: \(store["type"]?.stringValue ?? "?")"
            if let path = store["path"]?.stringValue { line += " \(path)" }
            if store["type"]?.stringValue == "sqlite" {
                if let note = store["note"]?.stringValue {
                    line += " (\(note)"
                } else if store["error"] != nil {
                    line += " (not opened"
                } else {
                    line += store["encrypted"] == .bool(true) ? " (encrypted" : " (not encrypted: tokens in plain text"
                }
                if let version = store["schemaVersion"]?.numberValue { line += ", schema \(version)" }
                line += ")"
            }
            if let message = store["error"]?["message"]?.stringValue { line += "; error: \(message)" }
            lines.append(line)
        }
        for session in result["sessions"]?.arrayValue ?? [] {
            var line =
                "\(session["environment"]?.stringValue ?? "?")/\(session["profile"]?.stringValue ?? "?") "
                + "(\(session["type"]?.stringValue ?? "?")): \(session["state"]?.stringValue ?? "?")"
            if let expiry = session["expiresAt"]?.stringValue { line += ", expires \(expiry)" }
            if session["refreshable"] == .bool(true) { line += ", refreshable" }
            if session["fromStore"] == .bool(true) { line += ", from the store" }
            if let message = session["lastError"]?["message"]?.stringValue { line += "; last error: \(message)" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// `tokenrelay logout [--config PATH] [--env E] [--profile P] [--all [--forget-key]]`.
    static func logout(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        let forgetKey = arguments.contains("--forget-key")
        let rest = arguments.filter { $0 != "--forget-key" }
        if forgetKey, !rest.contains("--all") {
            return CommandLineTool.usageError("--forget-key needs --all", command: "logout")
        }
        return await selection("logout", arguments: rest, environment: environment) { settings, params in
            switch await OneShot.logout(settings: settings, environment: nil, params: params, forgetKey: forgetKey) {
            case .failure(let error): .failure(error)
            case .success(let result):
                .success(
                    "logged out \(count(result["loggedOut"])) session(s)"
                        + (result["forgotten"]?.stringValue.map { "; \($0)" } ?? ""))
            }
        }
    }

    /// `tokenrelay invalidate [--config PATH] [--env E] [--profile P] [--all]`: the
    /// `token-invalidate` method from a shell (the selection as for `logout`).
    static func invalidate(arguments: [String], environment: [String: String])
        async -> Int32
    {
        await selection("invalidate", arguments: arguments, environment: environment) { settings, params in
            switch await OneShot.invalidate(settings: settings, environment: nil, params: params) {
            case .failure(let error): .failure(error)
            case .success(let result):
                .success("invalidated \(count(result["invalidated"])) session(s); they renew on their next use")
            }
        }
    }

    private static func count(_ value: JSONValue?) -> String { value?.numberValue.map { "\($0)" } ?? "0" }

    /// Parses a session selection (`--config PATH`, `--env E`, `--profile P`, `--all`), loads the
    /// configuration and runs `body` with the method's params; prints its line on stderr.
    private static func selection(
        _ command: String, arguments: [String], environment: [String: String],
        _ body: (Settings, JSONValue) async -> Result<String, RPCError>
    ) async -> Int32 {
        var parser = ArgumentParser(arguments, for: command)
        var configPath: String?
        var params = JSONObject()
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                switch argument {
                case "--config": configPath = try parser.value(for: argument)
                case "--env": params["environment"] = .string(try parser.value(for: argument))
                case "--profile": params["profile"] = .string(try parser.value(for: argument))
                case "--all": params["all"] = true
                default: throw ArgumentError("unknown option '\(argument)'")
                }
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: command)
        }
        log.configure(level: .warn, format: .text)
        guard let settings = await CommandLineTool.loadSettings(path: configPath, environment: environment) else {
            return ExitCodes.config
        }
        switch await body(settings, .object(params)) {
        case .failure(let error):
            return fail(error)
        case .success(let line):
            CommandLineTool.writeStandardError("tokenrelay: \(line)")
            return ExitCodes.success
        }
    }

    /// `tokenrelay store new-key` and `tokenrelay store rekey (--new-key-env NAME | --new-key-file PATH)`.
    static func store(arguments: [String], environment: [String: String]) async -> Int32 {
        guard let subcommand = arguments.first else {
            return CommandLineTool.usageError("store takes new-key or rekey")
        }
        switch subcommand {
        case "new-key":
            do throws(ArgumentError) {
                var parser = ArgumentParser(Array(arguments.dropFirst()), for: "store new-key")
                if let argument = try parser.next() { throw ArgumentError("unexpected argument '\(argument)'") }
            } catch {
                return CommandLineTool.usageError(error.message, command: "store new-key")
            }
            guard let key = OneShot.newStoreKey() else {
                CommandLineTool.writeStandardError("tokenrelay: no random bytes available")
                return ExitCodes.failure
            }
            CommandLineTool.writeStandardOutput(key)
            return ExitCodes.success
        case "rekey":
            return await rekey(arguments: Array(arguments.dropFirst()), environment: environment)
        default:
            return CommandLineTool.usageError("unknown store command '\(subcommand)' (new-key, rekey)")
        }
    }

    private static func rekey(arguments: [String], environment: [String: String]) async -> Int32 {
        var parser = ArgumentParser(arguments, for: "store rekey")
        var configPath: String?
        var newKey: NewStoreKey?
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                switch argument {
                case "--config": configPath = try parser.value(for: argument)
                case "--new-key-env":
                    let name = try parser.value(for: argument)
                    guard let value = environment[name], !value.isEmpty else {
                        throw ArgumentError("--new-key-env: the variable \(name) is not set")
                    }
                    newKey = .text(value)
                case "--new-key-keyring":
                    newKey = .secretService
                case "--new-key-file":
                    let path = try parser.value(for: argument)
                    guard let value = try? String(contentsOfFile: path, encoding: .utf8) else {
                        throw ArgumentError("--new-key-file: \(path) cannot be read")
                    }
                    newKey = .text(value)
                default: throw ArgumentError("unknown option '\(argument)'")
                }
            }
            guard newKey != nil else {
                throw ArgumentError("store rekey needs --new-key-env NAME, --new-key-file PATH or --new-key-keyring")
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "store rekey")
        }
        log.configure(level: .warn, format: .text)
        guard let newKey else { return ExitCodes.usage }
        if case .text(let text) = newKey { Redactor.shared.register(SQLiteTokenStore.trimmedKeyText(text)) }
        guard let settings = await CommandLineTool.loadSettings(path: configPath, environment: environment) else {
            return ExitCodes.config
        }
        let waiting: @Sendable (String) -> Void = { CommandLineTool.writeStandardError("tokenrelay: \($0)") }
        switch await OneShot.rekeyStore(settings: settings, newKey: newKey, waiting: waiting) {
        case .failure(let error):
            return fail(error)
        case .success(let (path, notes)):
            let next =
                if case .secretService = newKey {
                    "the secret service keeps it (no store.encryption_key or store.key: keyring opens it)"
                } else {
                    "set store.encryption_key to it"
                }
            CommandLineTool.writeStandardError(
                "tokenrelay: every record of \(path) is sealed under the new key; \(next)")
            for note in notes { CommandLineTool.writeStandardError("tokenrelay: \(note)") }
            return ExitCodes.success
        }
    }

    private static func fail(_ error: RPCError) -> Int32 {
        CommandLineTool.fail(error, in: .sessions)
    }
}
