import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// The tokenrelay binary under test, spawned with pipes. Output is read by background threads;
/// tests wait for lines or exit with generous safety timeouts, never with sleeps.
final class RelayProcess: Sendable {
    struct TimedOut: Error, CustomStringConvertible {
        let what: String
        var description: String { "timed out waiting for \(what)" }
    }

    final class OutputBox: Sendable {
        /// Guarded by the mutex: everything read so far and who waits for more.
        let state = Mutex(Output())

        func append(_ bytes: ArraySlice<UInt8>, isStdout: Bool) {
            let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
                if isStdout {
                    state.stdout.append(contentsOf: bytes)
                    state.stdoutLines += bytes.lazy.filter { $0 == 0x0A }.count
                } else {
                    state.stderr.append(contentsOf: bytes)
                }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        func end(isStdout: Bool) {
            let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
                if isStdout { state.stdoutClosed = true } else { state.stderrClosed = true }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    struct Output {
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
        TestScratch.path("tokenrelay-state")
    }

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    let process: ChildProcess
    /// The write end of the child's stdin; -1 once closed. Guarded by the mutex.
    private let stdinDescriptor: Mutex<Int32>
    private let output = OutputBox()
    private let stdoutReader: PipeReader
    private let stderrReader: PipeReader

    /// `nonBlockingStdin`: the child's stdin is a pipe in non-blocking mode, as a parent that
    /// shares its own non-blocking descriptor would give it. `launcher`: an argv that runs the
    /// binary (its path is appended), e.g. `unshare --pid --fork --mount-proc`.
    init(
        _ arguments: [String] = [], environment: [String: String] = [:], testMethods: Bool = true,
        nonBlockingStdin: Bool = false, launcher: [String] = []
    ) throws {
        _ = Self.ignoreBrokenPipes
        var env = ProcessInfo.processInfo.environment
        env["TOKENRELAY_CONFIG"] = nil
        env["XDG_CONFIG_HOME"] =
            FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-no-config").path
        if testMethods { env["TOKENRELAY_ENABLE_TEST_METHODS"] = "1" }
        env["XDG_STATE_HOME"] = Self.freshStateHome()
        for (key, value) in environment { env[key] = value }
        // Every descriptor has exactly one owner, so none is closed behind a blocked reader's
        // back or reused by another test while in use.
        let pipes = try ChildProcess.makePipes(3)
        let (stdinPipe, stdoutPipe, stderrPipe) = (pipes[0], pipes[1], pipes[2])
        if nonBlockingStdin { _ = fcntl(stdinPipe.read, F_SETFL, fcntl(stdinPipe.read, F_GETFL) | O_NONBLOCK) }
        stdinDescriptor = Mutex(stdinPipe.write)
        defer {
            // The child holds its own copies now (or never started).
            close(stdinPipe.read)
            close(stdoutPipe.write)
            close(stderrPipe.write)
        }
        do {
            process = try ChildProcess(
                launcher.first ?? Self.binaryPath,
                launcher.isEmpty ? arguments : Array(launcher.dropFirst()) + [Self.binaryPath] + arguments,
                environment: env, stdin: .descriptor(stdinPipe.read),
                stdout: .descriptor(stdoutPipe.write), stderr: .descriptor(stderrPipe.write)
            ) { [output] termination in
                let waiters: [CheckedContinuation<Void, Never>] = output.state.withLock { state in
                    state.exitCode = termination.status
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume() }
            }
        } catch {
            for fd in [stdinPipe.write, stdoutPipe.read, stderrPipe.read] { close(fd) }
            throw error
        }
        stdoutReader = PipeReader(stdoutPipe.read, into: output, isStdout: true)
        stderrReader = PipeReader(stderrPipe.read, into: output, isStdout: false)
    }

    deinit {
        process.signal(SIGKILL)
        stdinDescriptor.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
        stdoutReader.close()
        stderrReader.close()
    }

    /// Writing to a child that has exited is an EPIPE error for the test, not the death of the
    /// test process.
    private static let ignoreBrokenPipes: Void = { _ = Glibc.signal(SIGPIPE, SIG_IGN) }()

    /// Reads one output pipe on a thread of its own, which is also the only closer of the
    /// descriptor: ``close()`` and ``pause(_:)`` are requests the thread acts on (a descriptor
    /// closed while another thread is blocked in `read` on it keeps the pipe open, and its
    /// number may be reused by another test's pipe).
    final class PipeReader: Sendable {
        private struct Control {
            var paused = false
            var closeRequested = false
        }

        private final class ControlBox: Sendable {
            /// Guarded by the mutex: what the reader thread should do next.
            let state = Mutex(Control())
        }

        /// A pipe that wakes the reader thread out of `poll`; closed when both the reader and
        /// its thread are done with it, so its numbers are never reused under either.
        private final class WakePipe: Sendable {
            let read: Int32
            let write: Int32
            init() {
                let fds = (try? ChildProcess.makePipe(flags: O_NONBLOCK)) ?? (read: -1, write: -1)
                (read, write) = fds
            }
            func wake() {
                var byte: UInt8 = 1
                _ = Glibc.write(write, &byte, 1)
            }
            deinit {
                Glibc.close(read)
                Glibc.close(write)
            }
        }

        private let control = ControlBox()
        private let wakePipe = WakePipe()
        /// Fires once the thread has closed the pipe.
        let closed = OneShotSignal()

        init(_ fd: Int32, into output: OutputBox, isStdout: Bool) {
            let thread = Thread { [control, closed, wakePipe] in
                var buffer = [UInt8](repeating: 0, count: 65536)
                var ended = false
                while !ended {
                    let (paused, closing) = control.state.withLock { ($0.paused, $0.closeRequested) }
                    if closing { break }
                    var fds = [
                        pollfd(fd: wakePipe.read, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: paused ? -1 : fd, events: Int16(POLLIN), revents: 0),
                    ]
                    if poll(&fds, 2, -1) < 0 { continue }
                    if fds[0].revents != 0 {
                        var scratch = [UInt8](repeating: 0, count: 64)
                        _ = scratch.withUnsafeMutableBytes { read(wakePipe.read, $0.baseAddress, $0.count) }
                    }
                    guard !paused, fds[1].revents != 0 else { continue }
                    let count = buffer.withUnsafeMutableBytes { raw in read(fd, raw.baseAddress, raw.count) }
                    if count < 0 && errno == EINTR { continue }
                    ended = count <= 0
                    if !ended { output.append(buffer[0..<count], isStdout: isStdout) }
                }
                Glibc.close(fd)
                output.end(isStdout: isStdout)
                closed.fire()
            }
            thread.start()
        }

        /// Stops (true) or resumes (false) reading: a stalled peer.
        func pause(_ paused: Bool) {
            control.state.withLock { $0.paused = paused }
            wakePipe.wake()
        }

        /// Closes the pipe (a writer then gets EPIPE); idempotent.
        func close() {
            control.state.withLock { $0.closeRequested = true }
            wakePipe.wake()
        }
    }

    /// Writes raw bytes to the process's stdin.
    func write(_ text: String) throws { try write(Array(text.utf8)) }

    /// Writes raw bytes to the process's stdin (blocks while the pipe is full).
    func write(_ bytes: [UInt8]) throws {
        let fd = stdinDescriptor.withLock { $0 }
        guard fd >= 0 else { throw POSIXError(.EBADF) }
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(fd, base + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
                offset += written
            }
        }
    }

    /// Writes one NDJSON line.
    func send(_ json: String) throws { try write(json + "\n") }

    func closeStdin() throws {
        let fd = stdinDescriptor.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { close(fd) }
    }

    /// Stops reading the child's stdout (its writes block once the pipe is full), or resumes.
    func pauseStdout(_ paused: Bool) { stdoutReader.pause(paused) }

    /// Stops reading the child's stderr (its log writes block once the pipe is full), or resumes.
    func pauseStderr(_ paused: Bool) { stderrReader.pause(paused) }

    /// Closes our end of the child's stdout: its next write fails with EPIPE.
    func closeStdout() async {
        stdoutReader.close()
        await stdoutReader.closed.wait()
    }

    /// The child's process id.
    var pid: Int32 { process.pid }
    /// Whether the process was reaped already.
    var hasExited: Bool { output.state.withLock { $0.exitCode != nil } }

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

    /// The first stderr line containing `text`, once it arrived (re-checked on every output change).
    func stderrLine(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        @Sendable func find(_ bytes: [UInt8]) -> String? {
            String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.contains(text) }.map(String.init)
        }
        try await withSafetyTimer(timeout) {
            try await self.waitUntil("stderr containing \(text)", timeout: timeout) { find($0.stderr) != nil }
        }
        guard let line = find(output.state.withLock { $0.stderr }) else { throw TimedOut(what: "stderr \(text)") }
        return line
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

    /// Waits until stderr contains `text` (at least `occurrences` times).
    func waitForStderr(_ text: String, occurrences: Int = 1, timeout: Duration = .seconds(60)) async throws {
        let needle = Array(text.utf8)
        try await withSafetyTimer(timeout) {
            try await self.waitUntil("stderr '\(text)' \(occurrences) time(s)", timeout: timeout) { state in
                guard state.stderr.count >= needle.count else { return false }
                var found = 0
                for start in 0...(state.stderr.count - needle.count)
                where state.stderr[start..<(start + needle.count)].elementsEqual(needle) {
                    found += 1
                    if found == occurrences { return true }
                }
                return false
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

    func signal(_ number: Int32) { process.signal(number) }
}
