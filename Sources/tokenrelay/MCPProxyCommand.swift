import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

/// `tokenrelay mcp-proxy URL | --env NAME [--profile P]` (SPEC §9.6): a stdio MCP server (one
/// JSON-RPC message per line) forwarding to a remote MCP server over Streamable HTTP. Only the
/// server's messages go to stdout; the login URL and logs go to stderr.
enum MCPProxyCommand {
    static func run(arguments: [String], environment: [String: String]) async
        -> Int32
    {
        var parser = ArgumentParser(arguments, for: "mcp-proxy")
        var options = CommandOptions()
        var openBrowser = false
        var positional: [String] = []
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--browser": openBrowser = true
                default:
                    if argument.hasPrefix("-") { throw ArgumentError("unknown option '\(argument)' for mcp-proxy") }
                    positional.append(argument)
                }
            }
            guard positional.count == 1 || (positional.isEmpty && options.environment != nil) else {
                throw ArgumentError("mcp-proxy takes one URL, or --env NAME [--profile P]")
            }
            if !positional.isEmpty && (options.environment != nil || options.profile != nil) {
                throw ArgumentError("mcp-proxy takes a URL or --env NAME, not both")
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "mcp-proxy")
        }
        log.configure(level: options.logLevel, format: .text)
        let settings: Settings
        if let url = positional.first {
            let lower = url.lowercased()
            guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else {
                return CommandLineTool.usageError("mcp-proxy: '\(url)' is not an http(s) URL")
            }
            // With --config, the file's store (and its encryption key) keeps the sessions.
            var store = StoreSettings()
            if options.configPath != nil {
                guard
                    let loaded = await CommandLineTool.loadSettings(
                        path: options.configPath, environment: environment)
                else { return ExitCodes.config }
                store = loaded.store
            }
            settings = MCPProxy.implicitSettings(url: url, openBrowser: openBrowser, store: store)
        } else {
            guard
                let loaded = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
            else { return ExitCodes.config }
            settings = loaded
        }
        // Frames go to a duplicate of stdout; fd 1 points at stderr from now on. The writer and
        // the reader are `serve`'s: stdin is read while the client's unread answers fit in the
        // writer's bound, and a client that does not read cannot hold the stop up past the grace.
        let protocolOutput = ProcessSetup.protectStandardOutput()
        let (input, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        let writer = StdioWriter(fileDescriptor: protocolOutput, onPeerGone: { continuation.finish() })
        // Bounded like serve: its line size, and its requests in flight (stdin waits while all are taken).
        let flights = MCPProxyFlights(limit: settings.server.maxConcurrentRequests)
        let reader = StdioReader(
            framing: .ndjson, limits: FramingLimits(maximumMessageBytes: settings.server.maxMessageBytes),
            room: { writer.hasRoom(orWhenRoom: $0) && flights.hasRoom(orWhenRoom: $0) })
        reader.start(
            onFraming: { _ in }, onMessage: { continuation.yield($0) },
            onError: { log.warn("mcp-proxy: a message was dropped: \($0)") }, onEnd: { continuation.finish() })
        let signalSources = ProcessSetup.onSignals(ProcessSetup.stopping + ProcessSetup.reloading) { _ in
            continuation.finish()
        }
        defer { withExtendedLifetime((signalSources, reader)) {} }
        let failure = await MCPProxy.run(
            settings: settings, environment: options.environment, profile: options.profile, openBrowser: openBrowser,
            input: input, output: writer, flights: flights,
            gracePeriod: CommandLineTool.gracePeriod(environment: environment),
            notice: { log.notice($0) })
        if let failure { return CommandLineTool.fail(failure, in: .call, prefix: "mcp-proxy: ") }
        return ExitCodes.success
    }
}
