import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import Testing
import TokenRelayPlatform

@testable import TokenRelayLogging

/// The stderr writer: lines whole and in order whoever writes them (the thread that logs, inline,
/// or the writer thread), a bound past which lines are dropped and counted, never a blocked
/// caller.
@Suite(.timeLimit(.minutes(5))) struct LogWriterTests {
    /// A pipe whose read end the test drains on a thread of its own.
    final class Pipe: Sendable {
        let readEnd: Int32
        let writeEnd: Int32

        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            readEnd = ends[0]
            writeEnd = ends[1]
        }

        /// Everything until the write end is closed.
        func readAll() -> [UInt8] {
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return bytes }
                bytes += chunk[0..<count]
            }
        }

        deinit {
            close(readEnd)
            close(writeEnd)
        }
    }

    static func notice(_ count: Int) -> [UInt8] { Array("dropped \(count)\n".utf8) }

    static func lines(_ bytes: [UInt8]) -> [String] {
        String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test func linesFromManyThreadsArriveWholeAndInEachThreadsOrder() async throws {
        let pipe = try Pipe()
        let output = Mutex<[UInt8]>([])
        let readerDone = DispatchSemaphore(value: 0)
        SystemThread.start(named: "relay-test-read") {
            output.withLock { $0 = pipe.readAll() }
            readerDone.signal()
        }
        do {
            let writer = LogWriter(fileDescriptor: pipe.writeEnd, bound: 1 << 30, dropNotice: Self.notice)
            let padding = String(repeating: "x", count: 300)
            await withTaskGroup(of: Void.self) { group in
                for producer in 0..<4 {
                    group.addTask {
                        for index in 0..<2000 { writer.enqueue(Array("\(producer) \(index) \(padding)\n".utf8)) }
                    }
                }
            }
            #expect(writer.flush(timeout: .seconds(60)))
        }
        shutdownWriteEnd(pipe)
        #expect(readerDone.wait(timeout: .now() + 60) == .success)
        var next = [Int](repeating: 0, count: 4)
        let received = Self.lines(output.withLock { $0 })
        #expect(received.count == 8000)
        for line in received {
            let fields = line.split(separator: " ")
            guard fields.count == 3, let producer = Int(fields[0]), let index = Int(fields[1]), producer < 4 else {
                Issue.record("a line came apart: \(line.prefix(40))")
                return
            }
            #expect(index == next[producer])
            next[producer] = index + 1
            #expect(fields[2].count == 300)
        }
    }

    @Test func pastTheBoundLinesAreDroppedCountedAndReportedOnceDrained() throws {
        let pipe = try Pipe()
        let writer = LogWriter(fileDescriptor: pipe.writeEnd, bound: 8 << 10, dropNotice: Self.notice)
        // Nobody reads: the pipe (64 KiB) fills, then the queue (8 KiB), then lines are dropped,
        // and the caller never blocks.
        let line = Array((String(repeating: "y", count: 99) + "\n").utf8)
        for _ in 0..<2000 { writer.enqueue(line) }
        let output = Mutex<[UInt8]>([])
        let readerDone = DispatchSemaphore(value: 0)
        SystemThread.start(named: "relay-test-read") {
            output.withLock { $0 = pipe.readAll() }
            readerDone.signal()
        }
        #expect(writer.flush(timeout: .seconds(60)))
        shutdownWriteEnd(pipe)
        #expect(readerDone.wait(timeout: .now() + 60) == .success)
        let received = Self.lines(output.withLock { $0 })
        let written = received.filter { $0.hasPrefix("y") }
        #expect(written.allSatisfy { $0.count == 99 })
        let notices = received.filter { $0.hasPrefix("dropped ") }
        #expect(notices.count == 1)
        #expect(notices.first == "dropped \(2000 - written.count)")
        #expect(written.count < 2000)
        #expect(received.last == notices.first)
    }

    @Test func outputsAreToldApartByWhatTheyAre() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        let devZero = open("/dev/zero", O_WRONLY | O_CLOEXEC)
        try #require(devNull >= 0 && devZero >= 0)
        defer { [devNull, devZero].forEach { close($0) } }
        #expect(OutputFile.Kind(ends[1]) == .pipe)
        #expect(OutputFile.Kind(devNull) == .null)
        // Another character device (a terminal's kind) is not taken for /dev/null.
        #expect(OutputFile.Kind(devZero) == .other)
        #expect(!OutputFile.Kind(devZero).takesWritesWithoutBlocking)
        #expect(OutputFile.writeWithoutBlocking(devNull, Array("x\n".utf8), kind: .null) == .written(2))
        #expect(OutputFile.Kind(-1) == .other)
    }

    @Test func aRegularFileAndANonPipeOutputGetEveryLine() throws {
        let path = "/tmp/tokenrelay-logwriter-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let file = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(file >= 0)
        defer {
            close(file)
            unlink(path)
        }
        // /dev/null is written inline; /dev/zero, a character device like a terminal, only by
        // the writer's thread.
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        let devZero = open("/dev/zero", O_WRONLY | O_CLOEXEC)
        try #require(devNull >= 0 && devZero >= 0)
        defer { [devNull, devZero].forEach { close($0) } }
        for descriptor in [file, devNull, devZero] {
            let writer = LogWriter(fileDescriptor: descriptor, dropNotice: Self.notice)
            for index in 0..<500 { writer.enqueue(Array("line \(index)\n".utf8)) }
            #expect(writer.flush(timeout: .seconds(60)))
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(Self.lines(Array(text.utf8)) == (0..<500).map { "line \($0)" })
    }
}

/// Ends the pipe's reader (its `read` returns 0) while the test still holds the descriptor the
/// writer was given.
private func shutdownWriteEnd(_ pipe: LogWriterTests.Pipe) {
    let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
    _ = dup2(devNull, pipe.writeEnd)
    close(devNull)
}
