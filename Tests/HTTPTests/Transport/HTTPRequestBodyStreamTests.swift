import Synchronization
import Testing

@testable import TokenRelayHTTP

/// A request body handed to libcurl as it is produced: bytes in order, a pause while none is
/// queued (and a wake-up when some is), a writer held while the queue is full, and an abort that
/// frees both sides.
@Suite struct HTTPRequestBodyStreamTests {
    static func read(_ stream: HTTPRequestBodyStream, upTo count: Int) -> (HTTPRequestBodyStream.Read, [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: count)
        let result = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
        if case .bytes(let got) = result { return (result, Array(buffer[..<got])) }
        return (result, [])
    }

    @Test func bytesComeOutInOrderThenTheEnd() async {
        let stream = HTTPRequestBodyStream(length: 5, capacity: 64)
        #expect(await stream.write(Array("hel".utf8)))
        #expect(await stream.write(Array("lo".utf8)))
        stream.finish()
        #expect(Self.read(stream, upTo: 2).1 == Array("he".utf8))
        #expect(Self.read(stream, upTo: 10).1 == Array("llo".utf8))
        guard case .end = Self.read(stream, upTo: 10).0 else {
            Issue.record("no end after the last byte")
            return
        }
    }

    @Test func anEmptyQueuePausesAndTheNextWriteWakesTheReader() async {
        let stream = HTTPRequestBodyStream(length: nil, capacity: 64)
        let woken = WakeCounter()
        stream.attach { woken.add() }
        guard case .pause = Self.read(stream, upTo: 8).0 else {
            Issue.record("an empty queue did not pause")
            return
        }
        #expect(woken.count == 0)
        #expect(await stream.write([1, 2]))
        #expect(woken.count == 1)
        #expect(Self.read(stream, upTo: 8).1 == [1, 2])
        // Not paused since: a write does not wake again.
        #expect(await stream.write([3]))
        #expect(woken.count == 1)
    }

    @Test func aFullQueueHoldsTheWriterUntilItIsReadAndAbortFreesIt() async {
        let stream = HTTPRequestBodyStream(length: nil, capacity: 4)
        async let first = stream.write([UInt8](repeating: 7, count: 6))
        // The writer waits: the queue holds more than the capacity until the reader takes it.
        var taken: [UInt8] = []
        while taken.count < 6 {
            let (result, bytes) = Self.read(stream, upTo: 3)
            if case .pause = result { await Task.yield() }
            taken += bytes
        }
        #expect(await first)
        async let second = stream.write([UInt8](repeating: 8, count: 10))
        stream.abort()
        #expect(await second == false)
        guard case .abort = Self.read(stream, upTo: 3).0 else {
            Issue.record("an aborted stream was read")
            return
        }
        #expect(await stream.write([1]) == false)
    }
}

final class WakeCounter: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}
