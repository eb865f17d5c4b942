import FoundationEssentials
import Glibc
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

/// `tokenrelay login [--env E] [--profile P] [--no-browser] [--paste]`: an interactive login for a
/// shell user. What to do goes to stderr; exit 0 once the session is stored. With `--paste` the
/// person may paste the URL the browser was redirected to on stdin (SPEC §13.2).
enum LoginCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "login")
        var options = CommandOptions()
        var openBrowser = true
        var paste = false
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--no-browser": openBrowser = false
                case "--paste": paste = true
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
        // stdin's lines, read on a thread of their own (a blocking read) while the login waits.
        let reader = SerialThread(named: "login-paste")
        var pasted: AsyncStream<String>?
        if paste {
            let (lines, sink) = AsyncStream.makeStream(of: String.self)
            pasted = lines
            reader.async {
                // read(2), not stdio: a thread blocked in a stdio read holds stdin's lock, which the
                // process's last fflush(NULL) would then wait for.
                var pending: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    pending += buffer[0..<count]
                    while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        let line = String(decoding: pending[..<end], as: UTF8.self)
                        pending.removeSubrange(...end)
                        if !line.isEmpty { sink.yield(line) }
                    }
                    // A pasted URL is short: a line past 64 KiB is not one.
                    if pending.count > 1 << 16 { pending.removeAll() }
                }
                sink.finish()
            }
        }
        let outcome = await OneShot.login(
            settings: settings, environment: options.environment, profile: options.profile, openBrowser: openBrowser,
            pasted: pasted,
            onPasted: { refusal in
                CommandLineTool.writeStandardError(
                    refusal.map { "tokenrelay: \($0); paste the whole URL again, or finish in the browser" }
                        ?? "tokenrelay: the pasted URL was accepted; logging in")
            }
        ) { [paste] prompt in
            CommandLineTool.writeStandardError(instructions(prompt, paste: paste))
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

    /// The lines a person reads on stderr: what to open, and (SPEC §13.2) what to do when the
    /// browser is on another machine.
    static func instructions(_ prompt: JSONValue, paste: Bool) -> String {
        let object = prompt.objectValue
        let url = object?["url"]?.stringValue ?? ""
        if let code = object?["userCode"]?.stringValue {
            var text = "To log in, open \(url) and enter the code: \(code)"
            if let complete = object?["verificationUriComplete"]?.stringValue { text += "\n(or open \(complete))" }
            // A device code works from any machine's browser: there is no redirect to paste.
            if paste { text += "\nThis profile logs in with a device code, in any browser: there is no URL to paste." }
            return text
        }
        let elsewhere =
            paste
            ? "If the browser is on another machine, it ends on a page that cannot load: paste that page's whole"
                + " URL (from the address bar) here and press Enter."
            : "If the browser is on another machine (SSH, a container), run tokenrelay login --paste instead and"
                + " paste the URL the browser ends on; a device_code profile needs no browser here at all."
        return "To log in, open this URL in a browser:\n\(url)\n\(elsewhere)"
    }
}
