import Foundation
import Synchronization
import Testing

@testable import TokenRelayJSONRPC

/// The writer's inline path: a producer writes what the output takes without blocking (a pipe
/// with `RWF_NOWAIT`, a socket with `MSG_DONTWAIT`) and the rest goes, first in line, to the
/// writer thread; frames arrive whole and in order whatever the peer's buffer holds.
@Suite(.timeLimit(.minutes(5))) struct StdioWriterTests {
    enum Channel: String, CaseIterable, CustomTestStringConvertible {
        case pipe, socket
        var testDescription: String { rawValue }

        /// (read end, write end).
        func open() -> (Int32, Int32) {
            var fds: [Int32] = [0, 0]
            let made =
                switch self {
                case .pipe: Glibc.pipe(&fds)
                case .socket: socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
                }
            #expect(made == 0)
            return (fds[0], fds[1])
        }
    }

    static func message(_ byte: UInt8, count: Int) -> [UInt8] { [UInt8](repeating: byte, count: count) }

    /// Reads `count` bytes from `fd` on a thread of its own (blocking reads), or what came
    /// before end of input.
    static func read(_ count: Int, from fd: Int32) async -> [UInt8] {
        await withCheckedContinuation { continuation in
            Thread {
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 64 << 10)
                while received.count < count {
                    let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                    if got < 0, errno == EINTR { continue }
                    if got <= 0 { break }
                    received += buffer[0..<got]
                }
                continuation.resume(returning: received)
            }.start()
        }
    }

    static func readableNow(_ fd: Int32) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 1
    }

    @Test(arguments: Channel.allCases)
    func aLoneFrameIsWrittenByItsProducerBeforeSendReturns(_ channel: Channel) async throws {
        let (readEnd, writeEnd) = channel.open()
        defer { close(readEnd) }
        let writer = StdioWriter(fileDescriptor: writeEnd)
        writer.sendNow(Array(#"{"id":1}"#.utf8))
        // Nobody else could have written it yet: the writer thread is started only on need.
        #expect(Self.readableNow(readEnd))
        close(writeEnd)
        #expect(await Self.read(1 << 20, from: readEnd) == Array(#"{"id":1}"#.utf8) + [0x0A])
    }

    @Test(arguments: Channel.allCases)
    func framesLargerThanThePeersBufferArriveWholeAndInOrderWhileThePeerIsNotReading(_ channel: Channel)
        async throws
    {
        let (readEnd, writeEnd) = channel.open()
        defer { close(readEnd) }
        let writer = StdioWriter(fileDescriptor: writeEnd)
        // A small frame, one far larger than a pipe (64 KiB) or a socket buffer (~200 KiB), and
        // more small ones behind it: the producer writes what fits of the large one, the thread
        // the rest, and nothing may slip in between its parts.
        let messages =
            [Self.message(0x61, count: 100), Self.message(0x62, count: 700 << 10)]
            + (0..<50).map { Self.message(0x63 + UInt8($0 % 20), count: 300) }
        for message in messages { writer.sendNow(message) }  // returns without the peer reading
        let expected: [UInt8] = messages.flatMap { $0 + [0x0A] }
        let received = await Self.read(expected.count, from: readEnd)
        #expect(received.count == expected.count)
        #expect(received == expected)
        await writer.finish()
        close(writeEnd)
    }

    @Test(arguments: Channel.allCases)
    func aFrameThatFindsTheOutputFullWaitsForTheThreadAndKeepsItsPlace(_ channel: Channel) async throws {
        let (readEnd, writeEnd) = channel.open()
        defer { close(readEnd) }
        // Fill the output to the brim with filler the peer will read first.
        _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) | O_NONBLOCK)
        var filler = 0
        for size in [4096, 1] {
            let chunk = Self.message(0x2E, count: size)
            while chunk.withUnsafeBytes({ Glibc.write(writeEnd, $0.baseAddress, $0.count) }) == size { filler += size }
        }
        _ = fcntl(writeEnd, F_SETFL, fcntl(writeEnd, F_GETFL) & ~O_NONBLOCK)
        let writer = StdioWriter(fileDescriptor: writeEnd)
        writer.sendNow(Array("first".utf8))
        writer.sendNow(Array("second".utf8))
        let received = await Self.read(filler + 13, from: readEnd)
        #expect(received.count == filler + 13)
        #expect(Array(received.dropFirst(filler)) == Array("first\nsecond\n".utf8))
        await writer.finish()
        close(writeEnd)
    }

    @Test(arguments: Channel.allCases)
    func aPeerThatClosedItsEndIsReportedGoneAndLaterFramesAreDropped(_ channel: Channel) async throws {
        let (readEnd, writeEnd) = channel.open()
        close(readEnd)
        signal(SIGPIPE, SIG_IGN)  // as the server does: a write to a closed peer fails with EPIPE
        let gone = OneShotSignal()
        let writer = StdioWriter(fileDescriptor: writeEnd, onPeerGone: { gone.fire() })
        writer.sendNow(Array("lost".utf8))
        await gone.wait()
        #expect(writer.isBroken)
        writer.sendNow(Array("dropped".utf8))
        await writer.finish()  // returns: nothing is left waiting
        close(writeEnd)
    }

    /// Issue 44: a peer that stopped reading cannot hold a stopping server: once the unread output
    /// is abandoned, a producer waiting for room goes on, `finish` returns, later frames are
    /// dropped, and every byte given up is counted.
    @Test(arguments: Channel.allCases)
    func abandoningTheUnreadOutputLetsWaitingProducersAndTheFinishGo(_ channel: Channel) async throws {
        let (readEnd, writeEnd) = channel.open()
        defer {
            close(readEnd)
            close(writeEnd)
        }
        let writer = StdioWriter(fileDescriptor: writeEnd, bound: 1024)
        // Far more than the peer's buffer holds: most of it stays queued, over the bound.
        writer.sendNow(Self.message(0x61, count: 1 << 20))
        let room = writer.hasRoom(orWhenRoom: {})
        #expect(!room)
        writer.abandonUnread(after: .milliseconds(10))
        await writer.send(Array("waits".utf8))  // for room, which only the abandonment gives
        writer.sendNow(Array("dropped".utf8))
        await writer.finish()
        #expect(writer.isBroken)
        let abandoned = writer.abandonedBytes
        #expect(abandoned >= (1 << 20) - (512 << 10), "what the peer did not read")
        #expect(abandoned <= (1 << 20) + 1 + 6 + 8, "and the later frames")
    }

    @Test func ndjsonFramingAppendsTheNewlineAndLSPFramingPrefixesTheLength() {
        #expect(Framing.ndjson.frame(Array("{}".utf8)) == Array("{}\n".utf8))
        #expect(Framing.lsp.frame(Array("{}".utf8)) == Array("Content-Length: 2\r\n\r\n{}".utf8))
    }
}
