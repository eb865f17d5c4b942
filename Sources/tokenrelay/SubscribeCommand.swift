import FoundationEssentials
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay subscribe PATH`: follows an event stream and prints one JSON line per event
/// (`{"id"?, "event", "data", "retry"?}`) until SIGHUP/SIGINT/SIGQUIT/SIGTERM or the subscription
/// closes (then exit 0; with `--until-closed`, a clean end of the stream closes it).
enum SubscribeCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "subscribe")
        var positional: [String] = []
        var options = CommandOptions()
        var params = JSONObject()
        var headers = JSONObject()
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--last-event-id": params["lastEventId"] = .string(try parser.value(for: argument))
                case "-H", "--header":
                    let (name, value) = try ArgumentParser.header(try parser.value(for: argument))
                    headers[name] = .string(value)
                case "--until-closed": params["untilClosed"] = true
                case "--no-auth": params["auth"] = false
                case "-v", "--verbose": options.logLevel = .info
                default:
                    if argument.hasPrefix("-") { throw ArgumentError("unknown option '\(argument)'") }
                    positional.append(argument)
                }
            }
            guard positional.count == 1 else { throw ArgumentError("subscribe takes one PATH (or an absolute URL)") }
        } catch {
            return CommandLineTool.usageError(error.message, command: "subscribe")
        }
        log.configure(level: options.logLevel, format: .text)
        if let profile = options.profile { params["profile"] = .string(profile) }
        let target = positional[0]
        let lower = target.lowercased()
        params[lower.hasPrefix("http://") || lower.hasPrefix("https://") ? "url" : "path"] = .string(target)
        if !headers.isEmpty { params["headers"] = .object(headers) }
        guard let settings = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
        else {
            return ExitCodes.config
        }
        let handle = OneShot.SubscriptionHandle()
        // A one-shot command ends on SIGHUP as on SIGTERM: its terminal may have gone away.
        let signalSources = ProcessSetup.onSignals(ProcessSetup.stopping + ProcessSetup.reloading) { _ in
            handle.stop()
        }
        defer { withExtendedLifetime(signalSources) {} }
        let end = await OneShot.subscribe(
            settings: settings, environment: options.environment, params: .object(params), handle: handle
        ) { event in
            CommandLineTool.writeStandardOutput(event.jsonText)
        }
        switch end {
        case .stopped:
            return ExitCodes.success
        case .closed(_, nil):
            return ExitCodes.success
        case .closed(_, let failure?):
            return CommandLineTool.fail(kind: failure.kind, message: failure.message, in: .call)
        case .failed(let error):
            return CommandLineTool.fail(error, in: .call)
        }
    }
}
