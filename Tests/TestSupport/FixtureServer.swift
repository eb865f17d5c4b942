import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback fixture server for one test: a Python script run as `python3 -u SCRIPT ARGUMENTS`
/// (through `Fixtures/exit_with_parent.py`), ready once it printed its listening line (its
/// ports), killed when the test lets go of it and ending by itself when the test process dies.
/// Its stdout is read up to that line and then closed: a fixture prints nothing else there (its
/// stderr is the test's), and its stdin is not for it. The shared server is
/// `Fixtures/fixture_server.py` (`init(role:)`); a suite's own scripts start through
/// `init(script:)`.
public final class FixtureServer: Sendable {
    /// The fixture exited or printed something else before its listening line.
    public struct DidNotStart: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// This target's `Fixtures` folder: the shared server and its test certificate.
    public static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures")
    /// The certificate (self-signed for 127.0.0.1) the `transport` role's TLS listener serves;
    /// trust it as a CA file.
    public static let certificatePath = fixtures.appendingPathComponent("test_cert.pem").path

    /// The Python process.
    public let process: ChildProcess
    /// The words of the listening line, in order.
    public let words: [String]
    /// The write end of the server's stdin, held while it runs: its end of file tells the
    /// server (`exit_with_parent.py`) that the test process has gone.
    private let lifeline: Int32

    /// Starts the shared fixture server in `role` (`transport`, `events` or `recording LOG`; see
    /// its docstring) and waits for its listening line of `ports` port numbers.
    public convenience init(role: String, _ arguments: [String] = [], ports: Int) async throws {
        try await self.init(
            script: Self.fixtures.appendingPathComponent("fixture_server.py").path, [role] + arguments, words: ports)
    }

    /// Starts `script` with `arguments` and waits for its listening line of `words` words.
    public init(script: String, _ arguments: [String] = [], words count: Int) async throws {
        let pipes = try ChildProcess.makePipes(2)
        let (stdinPipe, stdoutPipe) = (pipes[0], pipes[1])
        defer {
            close(stdinPipe.read)
            close(stdoutPipe.write)
        }
        let wrapper = Self.fixtures.appendingPathComponent("exit_with_parent.py").path
        do {
            process = try ChildProcess(
                "/usr/bin/python3", ["-u", wrapper, script] + arguments,
                environment: ProcessInfo.processInfo.environment,
                stdin: .descriptor(stdinPipe.read), stdout: .descriptor(stdoutPipe.write))
        } catch {
            close(stdinPipe.write)
            close(stdoutPipe.read)
            throw error
        }
        lifeline = stdinPipe.write
        let line = String(decoding: await firstLine(of: stdoutPipe.read), as: UTF8.self)
        close(stdoutPipe.read)
        words = line.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        guard words.count == count else {
            stop()
            let name = URL(fileURLWithPath: script).lastPathComponent
            throw DidNotStart(description: "\(name) \(arguments.joined(separator: " ")) did not start: \(line)")
        }
    }

    deinit {
        stop()
        close(lifeline)
    }

    /// The listening line's words as port numbers (0 for a word that is not one).
    public var ports: [Int] { words.map { Int($0) ?? 0 } }

    /// Kills the server.
    public func stop() { process.signal(SIGKILL) }
}

/// Reads a fixture's first line (its ports) from `fd` on a thread of its own: a test must never
/// block a cooperative-pool thread while a Python process starts on a busy machine, or every
/// other test in the process stalls behind it. The line, or what came before end of file.
func firstLine(of fd: Int32) async -> [UInt8] {
    await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8], Never>) in
        Thread {
            var line: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !line.contains(0x0A) {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                line.append(contentsOf: buffer[0..<count])
            }
            continuation.resume(returning: line)
        }.start()
    }
}
