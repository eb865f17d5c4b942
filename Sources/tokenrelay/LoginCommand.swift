import FoundationEssentials
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay login [--env E] [--profile P] [--no-browser]`: an interactive login for a shell
/// user. What to do goes to stderr; exit 0 once the session is stored.
enum LoginCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "login")
        var options = CommandOptions()
        var openBrowser = true
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--no-browser": openBrowser = false
                default: throw ArgumentError("unknown argument '\(argument)' for login")
                }
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "login")
        }
        log.configure(level: options.logLevel, format: .text)
        guard let settings = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
        else {
            return ExitCodes.config
        }
        let outcome = await OneShot.login(
            settings: settings, environment: options.environment, profile: options.profile, openBrowser: openBrowser
        ) { prompt in
            CommandLineTool.writeStandardError(instructions(prompt))
        }
        switch outcome {
        case .failure(let error):
            return CommandLineTool.fail(error, in: .login, prefix: "login failed: ")
        case .success(let outcome):
            var line = "tokenrelay: logged in"
            if let subject = outcome.result.objectValue?["subject"]?.stringValue { line += " as \(subject)" }
            if !outcome.persisted {
                line +=
                    "; the store is memory (store: {type: memory}), so this login lasts only as long as this process"
                    + " and ends now: use the sqlite store to keep it"
            }
            CommandLineTool.writeStandardError(line)
            return ExitCodes.success
        }
    }

    /// The lines a person reads on stderr.
    static func instructions(_ prompt: JSONValue) -> String {
        let object = prompt.objectValue
        let url = object?["url"]?.stringValue ?? ""
        if let code = object?["userCode"]?.stringValue {
            var text = "To log in, open \(url) and enter the code: \(code)"
            if let complete = object?["verificationUriComplete"]?.stringValue { text += "\n(or open \(complete))" }
            return text
        }
        return "To log in, open this URL in a browser:\n\(url)"
    }
}
