import Foundation
import TestSupport
import Testing

/// The launcher every end-to-end test starts its processes with.
@Suite struct ChildProcessTests {
    /// Runs `arguments` with stdout on a pipe; how it ended and what it printed.
    static func run(_ executable: String, _ arguments: [String], directory: String? = nil) async throws -> (
        ChildProcess.Termination, String
    ) {
        let pipe = try ChildProcess.makePipe()
        let child: ChildProcess
        do {
            child = try ChildProcess(
                executable, arguments, environment: ["PATH": "/usr/bin:/bin"], directory: directory,
                stdout: .descriptor(pipe.write))
        } catch {
            close(pipe.read)
            close(pipe.write)
            throw error
        }
        close(pipe.write)
        defer { close(pipe.read) }
        let termination = try await child.wait(timeout: .seconds(60))
        // The output is a few bytes: all in the pipe once the child has exited.
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(pipe.read, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        return (termination, String(decoding: output, as: UTF8.self))
    }

    @Test func anExitCodeAndASignalAreToldApart() async throws {
        #expect(try await Self.run("/bin/sh", ["-c", "exit 3"]).0 == .exited(3))
        // SIGTERM is blocked in the test's threads: a child that inherited the mask would not die.
        #expect(try await Self.run("/bin/sh", ["-c", "kill -TERM $$; exit 0"]).0 == .signalled(SIGTERM))
    }

    @Test func theChildStartsWithNoSignalBlockedOrIgnoredAndOnlyItsThreeDescriptors() async throws {
        let (status, text) = try await Self.run("/bin/grep", ["-E", "^Sig(Blk|Ign)", "/proc/self/status"])
        #expect(status == .exited(0))
        // The standard signals (1-31; glibc keeps its own two real-time ones, 32 and 33, out of
        // the set posix_spawn resets, and sets them up in every process anyway).
        let masks = text.split(separator: "\n").compactMap { line in
            line.split(separator: "\t").last.flatMap { UInt64($0, radix: 16) }
        }
        #expect(masks.count == 2 && masks.allSatisfy { $0 & 0x7fff_ffff == 0 }, "\(text)")
        let (_, descriptors) = try await Self.run("/bin/sh", ["-c", "ls /proc/$$/fd"])
        #expect(descriptors.split(separator: "\n") == ["0", "1", "2"])
    }

    @Test func itRunsInTheDirectoryGiven() async throws {
        #expect(try await Self.run("/bin/pwd", [], directory: "/proc").1 == "/proc\n")
    }

    @Test func aTimeoutKillsReapsAndThrows() async throws {
        let child = try ChildProcess("/bin/sleep", ["600"], environment: [:], stdout: .null, stderr: .null)
        await #expect(throws: ChildProcess.TimedOut.self) { _ = try await child.wait(timeout: .milliseconds(100)) }
        #expect(child.termination == .signalled(SIGKILL))
        #expect(!child.isRunning)
        // Reaped: its pid may be another process's now, so it is not signalled.
        #expect(!child.signal(SIGTERM))
    }

    @Test func aProgramThatCannotStartIsAnError() {
        #expect(throws: ChildProcess.SpawnFailed.self) {
            _ = try ChildProcess("/nonexistent/program", [], environment: [:])
        }
    }
}
