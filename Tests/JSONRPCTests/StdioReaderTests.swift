import Foundation
import Synchronization
import Testing
import TokenRelayLogging
import TokenRelayPlatform

@testable import TokenRelayJSONRPC

/// The reader's hand-over: its thread gives stdin to a loop that asks for it (after a read) and
/// takes it back when the loop stops, framing state and all, so a frame split across the two
/// owners arrives whole, every frame arrives once and in order, and the end is reported once.
@Suite(.timeLimit(.minutes(5))) struct StdioReaderTests {
    /// A stand-in for a transfer loop: adopts the input once, reads it on a thread of its own for
    /// `reads` reads whenever it polls readable, then hands it back.
    final class OneTimePoller: InputPoller, Sendable {
        let reads: Int
        /// Guarded by the mutex: whether it has adopted, and how many reads it made.
        let state = Mutex((adopted: false, done: 0))
        let handedBack = OneShotSignal()

        init(reads: Int) { self.reads = reads }

        func adopt(_ input: any PolledInput) -> Bool {
            let first = state.withLock { state in
                defer { state.adopted = true }
                return !state.adopted
            }
            guard first else { return false }
            Thread { [self] in
                var open = true
                for _ in 0..<reads where open {
                    var entry = pollfd(fd: input.fileDescriptor, events: Int16(POLLIN), revents: 0)
                    // A safety net only: the test writes before it waits.
                    guard poll(&entry, 1, 60_000) > 0 else { break }
                    open = input.readAvailable()
                    state.withLock { $0.done += 1 }
                }
                if open { input.handBack() }
                handedBack.fire()
            }.start()
            return true
        }
    }

    final class Received: Sendable {
        /// Guarded by the mutex: message bodies in arrival order, and how often the end came.
        let state = Mutex((messages: [String](), ends: 0))
        let ended = OneShotSignal()
        /// The number of messages so far, after each one.
        let counts: AsyncStream<Int>
        let countsContinuation: AsyncStream<Int>.Continuation

        init() { (counts, countsContinuation) = AsyncStream.makeStream(of: Int.self) }

        func add(_ body: [UInt8]) {
            let count = state.withLock { state in
                state.messages.append(String(decoding: body, as: UTF8.self))
                return state.messages.count
            }
            countsContinuation.yield(count)
        }
    }

    static func frame(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"ping"}"# + "\n" }

    /// A reader of `descriptor` whose messages and end go to `received`, offered to `poller`.
    static func start(_ descriptor: Int32, poller: OneTimePoller, into received: Received) {
        let reader = StdioReader(
            fileDescriptor: descriptor, framing: .ndjson, limits: FramingLimits(), poller: { poller })
        reader.start(
            onFraming: { _ in },
            onMessage: { received.add($0) },
            onError: { _ in },
            onEnd: {
                received.state.withLock { $0.ends += 1 }
                received.ended.fire()
            })
    }

    /// A file as stdin: the thread's first read (64 KiB) ends mid-frame, the loop reads the next
    /// three 64 KiB, the thread the rest; the file's end (readable, nothing held) ends it once.
    @Test func aFileReadByBothOwnersArrivesWholeOnceAndInOrder() async throws {
        let count = 10_000
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reader-\(UUID().uuidString)").path
        try Data((0..<count).map(Self.frame).joined().utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        let poller = OneTimePoller(reads: 3)
        let received = Received()
        Self.start(descriptor, poller: poller, into: received)
        await received.ended.wait()
        await poller.handedBack.wait()

        let (messages, ends) = received.state.withLock { ($0.messages, $0.ends) }
        #expect(messages.count == count)
        #expect(messages == (0..<count).map { Self.frame($0).trimmingCharacters(in: .newlines) })
        #expect(ends == 1)
        #expect(poller.state.withLock { $0.done } == 3)
    }

    /// 40 frames written in pieces of 97 bytes, so that reads end mid-frame.
    @Test func framesSplitAcrossOwnersArriveWholeOnceAndInOrder() async throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let poller = OneTimePoller(reads: 3)
        let received = Received()
        Self.start(fds[0], poller: poller, into: received)

        // The thread reads the first piece, then hands over; the poller reads three pieces (one
        // ends in the middle of a frame) and hands back; the thread reads the rest.
        let text = Array((0..<40).map(Self.frame).joined().utf8)
        let pieces = stride(from: 0, to: text.count, by: 97).map { Array(text[$0..<min($0 + 97, text.count)]) }
        var counts = received.counts.makeAsyncIterator()
        var complete = 0
        for piece in pieces {
            #expect(piece.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) } == piece.count)
            // Each piece ends at least one frame: wait until the reader delivered them, so the
            // next write is the next read's.
            complete += piece.count { $0 == UInt8(ascii: "\n") }
            while let count = await counts.next(), count < complete {}
        }
        close(fds[1])
        await received.ended.wait()
        await poller.handedBack.wait()

        let (messages, ends) = received.state.withLock { ($0.messages, $0.ends) }
        #expect(messages == (0..<40).map { Self.frame($0).trimmingCharacters(in: .newlines) })
        #expect(ends == 1)
        #expect(poller.state.withLock { $0.done } == 3, "the poller read three times, then gave stdin back")
    }

}
