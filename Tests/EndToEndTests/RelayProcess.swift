import Foundation
import Synchronization
import Testing

@testable import JSONRPC

/// The tokenrelay binary under test, spawned with pipes. Output is read by background threads;
/// tests wait for lines or exit with generous safety timeouts, never with sleeps.
final class RelayProcess: Sendable {
    struct TimedOut: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting for \(what)" }
    }

    private final class OutputBox: Sendable {
        let state = Mutex(Output())
    }

    private struct Output {
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var stdoutClosed = false
        var stderrClosed = false
        var stdoutLines = 0
        var exitCode: Int32?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// The built binary: `$TOKENRELAY_BIN`, else next to the test bundle, else .build/debug.
    static var binaryPath: String {
        if let path = ProcessInfo.processInfo.environment["TOKENRELAY_BIN"] { return path }
        let besideTests = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("tokenrelay").path
        if FileManager.default.isExecutableFile(atPath: besideTests) { return besideTests }
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("tokenrelay").path,
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
                "tokenrelay"
            )
            .path,
            repositoryRoot.appendingPathComponent(".build/debug/tokenrelay").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[candidates.count - 1]
    }

    /// A new, empty `XDG_STATE_HOME` for one process: its session store is its own (tests that
    /// share a store pass `XDG_STATE_HOME` or `store.path` themselves), and no test ever writes
    /// into the real `~/.local/state`.
    static func freshStateHome() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-state-\(UUID().uuidString)").path
    }

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    let process: Process
    private let stdinHandle: FileHandle
    private let output = OutputBox()
    private let stdinOpen = Mutex(true)

    init(_ arguments: [String] = [], environment: [String: String] = [:], testMethods: Bool = true) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binaryPath)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["TOKENRELAY_CONFIG"] = nil
        env["XDG_CONFIG_HOME"] =
            FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-no-config").path
        if testMethods { env["TOKENRELAY_ENABLE_TEST_METHODS"] = "1" }
        env["XDG_STATE_HOME"] = Self.freshStateHome()
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        stdinHandle = stdinPipe.fileHandleForWriting
        process.terminationHandler = { [output] process in
            let waiters: [CheckedContinuation<Void, Never>] = output.state.withLock { state in
                state.exitCode = process.terminationStatus
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        try process.run()
        Self.drain(stdoutPipe.fileHandleForReading.fileDescriptor, into: output, isStdout: true)
        Self.drain(stderrPipe.fileHandleForReading.fileDescriptor, into: output, isStdout: false)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    private static func drain(_ fd: Int32, into output: OutputBox, isStdout: Bool) {
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { raw in read(fd, raw.baseAddress, raw.count) }
                if count < 0 && errno == EINTR { continue }
                let waiters: [CheckedContinuation<Void, Never>] = output.state.withLock { state in
                    if count > 0 {
                        if isStdout {
                            state.stdout.append(contentsOf: buffer[0..<count])
                            state.stdoutLines += buffer[0..<count].lazy.filter { $0 == 0x0A }.count
                        } else {
                            state.stderr.append(contentsOf: buffer[0..<count])
                        }
                    } else if isStdout {
                        state.stdoutClosed = true
                    } else {
                        state.stderrClosed = true
                    }
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume() }
                if count <= 0 { break }
            }
        }
        thread.start()
    }

    /// Writes raw bytes to the process's stdin.
    func write(_ text: String) throws {
        try stdinHandle.write(contentsOf: Data(text.utf8))
    }

    /// Writes one NDJSON line.
    func send(_ json: String) throws { try write(json + "\n") }

    func closeStdin() throws {
        let wasOpen = stdinOpen.withLock { open in
            defer { open = false }
            return open
        }
        if wasOpen { try stdinHandle.close() }
    }

    var stdoutText: String { output.state.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    var stderrText: String { output.state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }
    var stdoutBytes: [UInt8] { output.state.withLock { $0.stdout } }

    /// Waits until `condition` holds on the output state (re-checked on every change).
    private func waitUntil(_ what: String, timeout: Duration, _ condition: @escaping @Sendable (Output) -> Bool)
        async throws
    {
        let deadline = ContinuousClock.now + timeout
        while true {
            if output.state.withLock({ condition($0) }) { return }
            if ContinuousClock.now >= deadline { throw TimedOut(what: what) }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now: Bool = output.state.withLock { state in
                    if condition(state) { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    /// Parsed NDJSON lines of stdout once at least `count` complete lines arrived.
    func lines(atLeast count: Int, timeout: Duration = .seconds(60)) async throws -> [JSONValue] {
        try await withSafetyTimer(timeout) {
            try await self.waitUntil("\(count) lines", timeout: timeout) { state in
                state.stdoutLines >= count || state.stdoutClosed
            }
        }
        // Only complete lines: the last one may still be arriving.
        var text = stdoutText
        if let lastNewline = text.lastIndex(of: "\n") { text = String(text[...lastNewline]) } else { text = "" }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.count >= count else { throw TimedOut(what: "\(count) lines (stdout closed after \(lines.count))") }
        return try lines.map { try JSONParser.parse(String($0)) }
    }

    /// Waits until `condition` holds on the stdout bytes received so far (for LSP framing, where
    /// ``lines(atLeast:timeout:)`` does not apply).
    func waitForStdout(
        _ what: String, timeout: Duration = .seconds(60), until condition: @escaping @Sendable ([UInt8]) -> Bool
    ) async throws {
        try await withSafetyTimer(timeout) {
            try await self.waitUntil(what, timeout: timeout) { condition($0.stdout) || $0.stdoutClosed }
        }
        guard condition(stdoutBytes) else { throw TimedOut(what: "\(what) (stdout closed)") }
    }

    /// Waits until stderr contains `text`.
    func waitForStderr(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let needle = Array(text.utf8)
        try await withSafetyTimer(timeout) {
            try await self.waitUntil("stderr '\(text)'", timeout: timeout) { state in
                state.stderr.count >= needle.count
                    && (0...(state.stderr.count - needle.count)).contains {
                        state.stderr[$0..<($0 + needle.count)].elementsEqual(needle)
                    }
            }
        }
    }

    /// Waits for the exit code and for both output pipes to be drained to their end, so that
    /// `stdoutText` and `stderrText` are complete afterwards.
    func exitCode(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await withSafetyTimer(timeout) {
            try await self.waitUntil("exit", timeout: timeout) {
                $0.exitCode != nil && $0.stdoutClosed && $0.stderrClosed
            }
        }
        return output.state.withLock { $0.exitCode } ?? -1
    }

    /// Wakes the waiters periodically so that deadlines are noticed even with no output.
    private func withSafetyTimer(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws
    {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await body() }
            group.addTask { [output] in
                let deadline = ContinuousClock.now + timeout + .seconds(1)
                while ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(500))
                    let waiters = output.state.withLock { state in
                        defer { state.waiters = [] }
                        return state.waiters
                    }
                    for waiter in waiters { waiter.resume() }
                }
            }
            try await group.next()
            group.cancelAll()
        }
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }
}
