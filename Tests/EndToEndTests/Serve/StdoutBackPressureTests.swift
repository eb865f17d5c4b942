import Foundation
import Synchronization
import Testing

@testable import TokenRelayJSONRPC

/// SPEC §7 "Concurrency limits": stdin is read while fewer than 32 MiB of replies wait to be
/// written; past that reading pauses until the peer reads. Every reply counts, including the
/// ones the reader thread produces itself (here: unknown methods, answered without a task).
@Suite struct StdoutBackPressureTests {
    /// About 1 KiB per frame, 50 MiB in all: more replies than the bound holds.
    static let frameCount = 51_200
    static let frameSize = 1024

    static func frame(_ id: Int) -> [UInt8] {
        let head = #"{"jsonrpc":"2.0","id":\#(id),"method":"no-such-method/"#
        let tail = #""}"# + "\n"
        let padding = String(repeating: "x", count: frameSize - head.utf8.count - tail.utf8.count)
        return Array((head + padding + tail).utf8)
    }

    /// With stdin read by its own thread (no transfer yet), and by the transfer loop that took it
    /// over after a request (it leaves stdin out of its poll until the writer says there is room).
    @Test(arguments: [false, true])
    func aPeerThatDoesNotReadStdoutPausesStdinWithinTheBoundAndLosesNoAnswer(readByTheLoop: Bool) async throws {
        let (relay, server) = try await StdinOwnershipTests.relay(readByTheLoop: readByTheLoop)
        defer { withExtendedLifetime(server) {} }
        #expect(try await relay.call("ping")["result"] != nil, "ready")
        let linesBefore = relay.parsedLines.count
        let startRSS = try #require(relay.residentBytes)
        let peak = PeakResidentSize(pid: relay.pid)
        relay.pauseStdout(true)

        let written = OneShotSignal()
        let writeFailed = Mutex<(any Error)?>(nil)
        let writer = Thread {
            do {
                var chunk: [UInt8] = []
                for id in 0..<Self.frameCount {
                    chunk.append(contentsOf: Self.frame(id))
                    if chunk.count >= 64 << 10 || id == Self.frameCount - 1 {
                        try relay.write(chunk)
                        chunk.removeAll(keepingCapacity: true)
                    }
                }
            } catch {
                writeFailed.withLock { $0 = error }
            }
            written.fire()
        }
        writer.start()

        // The child says it paused reading (its stdin pipe then fills and our writer blocks);
        // without back-pressure it would read everything instead.
        let decided = OneShotSignal()
        Task {
            _ = try? await relay.waitForStderr("stdin paused", timeout: .seconds(300))
            decided.fire()
        }
        Task {
            await written.wait()
            decided.fire()
        }
        await decided.wait()
        let pausedRSS = try #require(relay.residentBytes)
        #expect(relay.stderrText.contains("stdin paused"), "the child paused reading stdin")
        #expect(!written.hasFired, "the writer cannot finish while the child does not read")
        relay.pauseStdout(false)
        await written.wait()
        #expect(writeFailed.withLock { $0 } == nil)
        let afterWritingRSS = try #require(relay.residentBytes)
        let lines = try await relay.lines(atLeast: linesBefore + Self.frameCount, timeout: .seconds(300))
        let endRSS = try #require(relay.residentBytes)
        let peakRSS = peak.stop()
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)

        let growth = max(peakRSS, pausedRSS, afterWritingRSS, endRSS) - startRSS
        print(
            "RSS start \(startRSS >> 20) MiB, paused \(pausedRSS >> 20) MiB, after writing "
                + "\(afterWritingRSS >> 20) MiB, end \(endRSS >> 20) MiB, peak \(peakRSS >> 20) MiB")
        #expect(growth <= 64 << 20, "RSS grew by \(growth >> 20) MiB")
        let answered = lines.dropFirst(linesBefore).compactMap { line -> Int? in
            guard line["error"]?["code"] == .int(-32601) else { return nil }
            return line["id"]?.numberValue?.intValue
        }
        #expect(answered.count == Self.frameCount)
        #expect(answered == Array(0..<Self.frameCount), "every answer, in order")
        if readByTheLoop {
            #expect(!relay.stderrText.contains(StdinOwnershipTests.givenBack), "the loop paused stdin itself")
        }
    }
}

/// Samples a process's VmRSS on a thread of its own until stopped; reports the largest value.
/// (A measurement running alongside the test, not a wait.)
final class PeakResidentSize: Sendable {
    /// Guarded by the mutex: the largest sample, and whether to stop.
    private let state = Mutex((peak: 0, stopped: false))

    init(pid: Int32) {
        let thread = Thread { [self] in
            while !state.withLock({ $0.stopped }) {
                if let rss = RelayProcess.residentBytes(pid: pid) {
                    state.withLock { $0.peak = max($0.peak, rss) }
                }
                usleep(2000)
            }
        }
        thread.start()
    }

    /// Stops sampling; the largest VmRSS seen.
    func stop() -> Int {
        state.withLock { $0.stopped = true }
        return state.withLock { $0.peak }
    }
}

/// Finding 11 of issue 11: a parent that does not read stderr must not stop the server. Log
/// lines past a bounded queue are dropped and counted; the log says so once it catches up.
@Suite struct UnreadStderrTests {
    @Test func aChildLoggingAtTraceWhoseStderrIsNotReadKeepsAnsweringAndReportsDroppedLines() async throws {
        let relay = try RelayProcess(["--log-level", "trace"])
        try relay.send(#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)
        relay.pauseStderr(true)
        // Each unknown notification makes the stdin reader thread itself log a line: about
        // 2.5 MB of log, far more than the stderr pipe and the log queue hold.
        let method = "no-such-notification/" + String(repeating: "n", count: 230)
        var text = ""
        for _ in 0..<10_000 { text += #"{"jsonrpc":"2.0","method":"\#(method)"}"# + "\n" }
        for id in 1...100 { text += #"{"jsonrpc":"2.0","id":\#(id),"method":"ping"}"# + "\n" }
        // From a thread of its own: a child stuck on stderr would block this write forever,
        // and the wait below is what must fail then.
        let bytes = Array(text.utf8)
        Thread { try? relay.write(bytes) }.start()
        let answers = try await relay.lines(atLeast: 101, timeout: .seconds(120))
        #expect(Set(answers.compactMap { $0["id"]?.numberValue?.intValue }) == Set(0...100))
        relay.pauseStderr(false)
        try await relay.waitForStderr("log line(s) dropped")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }
}
