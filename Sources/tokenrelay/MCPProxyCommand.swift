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
    /// The largest message line read from the client.
    static let maximumLineBytes = 64 << 20

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
        // Frames go to a duplicate of stdout; fd 1 points at stderr from now on.
        let protocolOutput = ProcessSetup.protectStandardOutput()
        let writeLock = Mutex(())
        let output: @Sendable ([UInt8]) -> Void = { message in
            var line = message
            line.append(0x0A)
            writeLock.withLock { _ in _ = OutputFile.writeAll(protocolOutput, line) }
        }
        let (input, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        guard startReadingStandardInput(into: continuation) else {
            return CommandLineTool.fail(kind: .internal, message: "could not start the input reader", in: .call)
        }
        let signalSources = ProcessSetup.onSignals(ProcessSetup.stopping + ProcessSetup.reloading) { _ in
            continuation.finish()
        }
        defer { withExtendedLifetime(signalSources) {} }
        let failure = await MCPProxy.run(
            settings: settings, environment: options.environment, profile: options.profile, openBrowser: openBrowser,
            input: input, output: output, notice: { CommandLineTool.writeStandardError($0) })
        if let failure { return CommandLineTool.fail(failure, in: .call, prefix: "mcp-proxy: ") }
        return ExitCodes.success
    }

    /// Reads stdin on a thread of its own, one message per line, through the same framer `serve`
    /// uses (NDJSON: CR tolerated, blank lines skipped, a line over the bound dropped with a
    /// warning), until end of file.
    private static func startReadingStandardInput(into continuation: AsyncStream<[UInt8]>.Continuation) -> Bool {
        SystemThread.start(named: "mcp-stdin") {
            var framer = MessageFramer(framing: .ndjson, limits: FramingLimits(maximumMessageBytes: maximumLineBytes))
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            func deliver(_ outputs: [FramerOutput]) {
                for output in outputs {
                    switch output {
                    case .message(let line): continuation.yield(line)
                    case .error(let error): log.warn("mcp-proxy: a message was dropped: \(error)")
                    }
                }
            }
            while true {
                let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                deliver(framer.push(buffer[0..<count]))
            }
            deliver(framer.finish())
            continuation.finish()
        }
    }
}
