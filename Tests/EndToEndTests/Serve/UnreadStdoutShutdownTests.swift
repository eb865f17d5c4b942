import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// Issue 44: a host that stopped reading a long-running command's stdout and then wants it gone
/// (SIGTERM, or the end of its stdin) gets that within the grace period (README "Signals"): what
/// the host did not read is abandoned, counted on stderr, and the process exits 0. Each child's
/// stdout is a pipe the test never reads, holding an answer far larger than the pipe, so the
/// rest of it waits in the child's writer when the stop comes.
@Suite struct UnreadStdoutShutdownTests {
    enum Command: String, CaseIterable, Sendable {
        case serve, mcp
        case mcpProxy = "mcp-proxy"
    }

    enum Stop: String, CaseIterable, Sendable {
        case sigterm, endOfInput
    }

    /// Far more than a pipe holds (64 KiB by default, 1 MiB at most unprivileged).
    static let answerPadding = 4 << 20
    static let canary = "canary-bearer-8f2d1c7e5a"

    @Test(arguments: Command.allCases, Stop.allCases)
    func aCommandWhoseStdoutIsNotReadStillStops(command: Command, stop: Stop) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "tokenrelay-unread-stdout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        var upstream: FixtureServer?
        defer { upstream?.stop() }
        let padding = String(repeating: "x", count: Self.answerPadding)
        let request: String
        let config: String
        switch command {
        case .serve, .mcp:
            // An unknown method is answered with its name: an answer as large as the request.
            request = #"{"jsonrpc":"2.0","id":1,"method":"no-such-method/\#(padding)"}"#
            config = """
                version: 1
                default_environment: local
                environments:
                  local:
                    base_url: http://127.0.0.1:9
                """
        case .mcpProxy:
            // The upstream reflects each message: the proxy's answer is as large as the request.
            let fixture = try await FixtureServer(
                role: "recording", [folder.appendingPathComponent("requests.log").path], ports: 3)
            upstream = fixture
            let port = try #require(Int(fixture.words[0]))
            request = #"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"\#(padding)"}}"#
            config = """
                version: 1
                default_environment: upstream
                environments:
                  upstream:
                    base_url: http://127.0.0.1:\(port)/api/reflect
                    default_profile: static
                    profiles:
                      static:
                        type: bearer
                        token: { env: E2E_BEARER }
                """
        }
        let configPath = folder.appendingPathComponent("config.yaml").path
        try Data(config.utf8).write(to: URL(fileURLWithPath: configPath))
        let arguments =
            switch command {
            case .serve, .mcp: [command.rawValue, "--config", configPath]
            case .mcpProxy: ["mcp-proxy", "--config", configPath, "--env", "upstream"]
            }
        let child = try UnreadChild(
            arguments, folder: folder,
            environment: [
                "E2E_BEARER": Self.canary, "TOKENRELAY_ENABLE_TEST_METHODS": "1", "TOKENRELAY_TEST_GRACE_MS": "500",
            ])
        defer { child.close() }

        try child.write(Array((request + "\n").utf8))
        // The answer has started to reach the pipe: most of it now waits in the child's writer.
        try await child.waitUntilStdoutHasData()
        switch stop {
        case .sigterm: child.process.signal(SIGTERM)
        case .endOfInput: child.closeStdin()
        }
        let termination = try await child.process.wait(timeout: .seconds(60))
        #expect(termination == .exited(0), "the documented exit code (README \"Signals\")")
        let stderr = await child.stderrText()
        #expect(stderr.contains("abandoned"), "the unread output is counted on stderr: \(stderr.prefix(2000))")
        #expect(!stderr.contains(Self.canary))
        #expect(!stderr.contains(String(repeating: "x", count: 64)), "no content of the abandoned output")
    }
}

/// A tokenrelay child with stdin and stderr pipes the test uses and a stdout pipe it never reads,
/// with a private HOME and XDG folders under `folder`.
private final class UnreadChild: Sendable {
    let process: ChildProcess
    private let stdinWrite: Mutex<Int32>
    private let stdoutRead: Int32
    private let stderrBytes = Mutex<[UInt8]>([])
    private let stderrEnded = OneShotSignal()

    init(_ arguments: [String], folder: URL, environment: [String: String]) throws {
        var env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        for name in ["home", "state", "config", "cache", "data"] {
            let path = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: path, withIntermediateDirectories: true)
            switch name {
            case "home": env["HOME"] = path.path
            default: env["XDG_\(name.uppercased())_HOME"] = path.path
            }
        }
        for (key, value) in environment { env[key] = value }
        let pipes = try ChildProcess.makePipes(3)
        let (stdinPipe, stdoutPipe, stderrPipe) = (pipes[0], pipes[1], pipes[2])
        defer {
            Glibc.close(stdinPipe.read)
            Glibc.close(stdoutPipe.write)
            Glibc.close(stderrPipe.write)
        }
        do {
            process = try ChildProcess(
                RelayProcess.binaryPath, arguments, environment: env, stdin: .descriptor(stdinPipe.read),
                stdout: .descriptor(stdoutPipe.write), stderr: .descriptor(stderrPipe.write))
        } catch {
            for fd in [stdinPipe.write, stdoutPipe.read, stderrPipe.read] { Glibc.close(fd) }
            throw error
        }
        stdinWrite = Mutex(stdinPipe.write)
        stdoutRead = stdoutPipe.read
        let stderrFD = stderrPipe.read
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(stderrFD, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                stderrBytes.withLock { $0 += buffer[0..<count] }
            }
            Glibc.close(stderrFD)
            stderrEnded.fire()
        }.start()
    }

    /// Writes `bytes` to the child's stdin from a thread of its own (the child may stop reading).
    func write(_ bytes: [UInt8]) throws {
        let fd = stdinWrite.withLock { $0 }
        guard fd >= 0 else { throw POSIXError(.EBADF) }
        Thread {
            var offset = 0
            bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { return }
                while offset < raw.count {
                    let written = Glibc.write(fd, base + offset, raw.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }.start()
    }

    /// Waits (60 s at most: a failure bound) until the child has written to stdout, without
    /// reading any of it.
    func waitUntilStdoutHasData() async throws {
        let fd = stdoutRead
        let ready = try await OffPool.run {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            var result: Int32
            repeat { result = poll(&poller, 1, 60_000) } while result < 0 && errno == EINTR
            return result > 0
        }
        if !ready { throw RelayProcess.TimedOut(what: "output on stdout") }
    }

    func closeStdin() {
        let fd = stdinWrite.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Everything the child wrote to stderr, once it has closed it (it has exited).
    func stderrText() async -> String {
        await stderrEnded.wait()
        return stderrBytes.withLock { String(decoding: $0, as: UTF8.self) }
    }

    /// Kills the child if it still runs and closes the test's descriptors.
    func close() {
        process.signal(SIGKILL)
        closeStdin()
        Glibc.close(stdoutRead)
    }
}
