import FoundationEssentials
import Glibc
import TokenRelayCommands
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// `tokenrelay call METHOD PATH`: one request for shell users. Prints the response body to
/// stdout; `-v` prints the status line and headers to stderr.
enum CallCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "call")
        var positional: [String] = []
        var options = CommandOptions()
        var params = JSONObject()
        var headers = JSONObject()
        var query: [String: [JSONValue]] = [:]
        var queryOrder: [String] = []
        var verbose = false
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "-H", "--header":
                    let (name, value) = try ArgumentParser.header(try parser.value(for: argument))
                    headers[name] = .string(value)
                case "--query":
                    let pair = try parser.value(for: argument)
                    let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    let name = String(parts[0])
                    if query[name] == nil { queryOrder.append(name) }
                    query[name, default: []].append(.string(parts.count > 1 ? String(parts[1]) : ""))
                case "--json":
                    let text = try parser.value(for: argument)
                    guard let value = try? JSONParser.parse(text) else {
                        throw ArgumentError("--json is not valid JSON")
                    }
                    params["json"] = value
                case "--data": params["text"] = .string(try parser.value(for: argument))
                case "--timeout":
                    let text = try parser.value(for: argument)
                    guard let seconds = Double(text.hasSuffix("s") ? String(text.dropLast()) : text), seconds > 0 else {
                        throw ArgumentError("--timeout takes seconds, e.g. 5 or 2.5s")
                    }
                    params["timeoutMs"] = .int(Int(seconds * 1000))
                case "--no-auth": params["auth"] = false
                case "-v", "--verbose": verbose = true
                default:
                    if argument.hasPrefix("-") && argument != "-" {
                        throw ArgumentError("unknown option '\(argument)'")
                    }
                    positional.append(argument)
                }
            }
            guard positional.count == 2 else { throw ArgumentError("call takes METHOD and PATH (or an absolute URL)") }
            if params["json"] != nil && params["text"] != nil { throw ArgumentError("give --json or --data, not both") }
        } catch {
            return CommandLineTool.usageError(error.message, command: "call")
        }
        // `-v` also shows the info log: why credentials were not attached, token renewals.
        if verbose { options.logLevel = max(options.logLevel, .info) }
        log.configure(level: options.logLevel, format: .text)
        // The request needs libcurl (and maybe the store): libcrypto loads while the configuration
        // is read, the rest once the call knows its profile (OneShot.CallLibraries says why).
        let libraries = OneShot.CallLibraries.startLoading()
        if let profile = options.profile { params["profile"] = .string(profile) }
        params["method"] = .string(positional[0].uppercased())
        let target = positional[1]
        let lower = target.lowercased()
        params[lower.hasPrefix("http://") || lower.hasPrefix("https://") ? "url" : "path"] = .string(target)
        if !headers.isEmpty { params["headers"] = .object(headers) }
        if !queryOrder.isEmpty {
            params["query"] = .object(
                JSONObject(
                    queryOrder.map { name in
                        let values = query[name] ?? []
                        return (key: name, value: values.count == 1 ? values[0] : .array(values))
                    }))
        }
        guard let settings = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
        else {
            return ExitCodes.config
        }
        switch await OneShot.call(
            settings: settings, environment: options.environment, params: .object(params), libraries: libraries)
        {
        case .failure(let error):
            return CommandLineTool.fail(error, in: .call)
        case .success(let (response, elapsed)):
            if verbose {
                var lines = ["HTTP \(response.status) (\(DurationText.format(elapsed)))"]
                for field in response.headers { lines.append("\(field.name): \(field.value)") }
                CommandLineTool.writeStandardError(lines.joined(separator: "\n"))
            }
            CommandLineTool.writeRaw(STDOUT_FILENO, response.body)
            switch response.status {
            case 200..<300: return ExitCodes.success
            case 400..<500: return ExitCodes.clientError
            case 500..<600: return ExitCodes.serverError
            default: return ExitCodes.otherStatus
            }
        }
    }
}
