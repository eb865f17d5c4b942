import Foundation
import TestSupport
import Testing
import TokenRelayPlatform

@testable import TokenRelayHTTP

/// End-to-end tests of `CurlTransport.stream` against the Python server on 127.0.0.1.
@Suite struct CurlStreamingTests {
    static let capacity = 64 << 10
    let server: TestServer
    let transport: CurlTransport

    init() async throws {
        server = try await TestServer()
        transport = try CurlTransport(options: .init(streamBufferBytes: Self.capacity))
    }

    /// Reads the whole body, checking the server's pattern (byte i = i % 251).
    static func readPattern(_ body: HTTPByteStream, startingAt start: Int = 0) async throws -> (
        count: Int, inOrder: Bool
    ) {
        var offset = start
        var inOrder = true
        for try await chunk in body {
            inOrder = inOrder && Self.matchesPattern(chunk, at: offset)
            offset += chunk.count
        }
        return (offset - start, inOrder)
    }

    /// Whether `chunk` is the server's pattern starting at stream offset `offset`.
    static func matchesPattern(_ chunk: [UInt8], at offset: Int) -> Bool {
        chunk.indices.allSatisfy { chunk[$0] == UInt8((offset + $0) % 251) }
    }

    /// Expects the next read to throw a stall (the server keeps the connection open for 30 s).
    static func expectStall(_ iterator: inout HTTPByteStream.AsyncIterator, idle: Duration) async {
        do {
            let chunk = try await iterator.next()
            Issue.record("expected a stall, got \(chunk?.count ?? -1) bytes")
        } catch let error as HTTPStreamStalled {
            #expect(error.idleTimeout == idle)
        } catch {
            Issue.record("expected a stall, got \(error)")
        }
    }

    @Test(arguments: [1, 1000, 70_000])
    func streamDeliversEveryByteInOrder(chunk: Int) async throws {
        let response = try await transport.stream(HTTPRequest(url: server.url("/stream?bytes=300000&chunk=\(chunk)")))
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/octet-stream")
        let (count, inOrder) = try await Self.readPattern(response.body)
        #expect(count == 300_000)
        #expect(inOrder)
    }

    @Test func slowConsumerPausesTheTransferAndTheBufferStaysBounded() async throws {
        let total = 4 << 20
        let response = try await transport.stream(HTTPRequest(url: server.url("/stream?bytes=\(total)&chunk=65536")))
        let channel = try #require(response.body.channel)
        var iterator = response.body.makeAsyncIterator()
        let first = try #require(try await iterator.next())
        // Do not read: the producer must fill the buffer and pause.
        await withSafetyNet { await channel.waitUntilPaused() }
        var offset = first.count
        var inOrder = Self.matchesPattern(first, at: 0)
        while let chunk = try await iterator.next() {
            inOrder = inOrder && Self.matchesPattern(chunk, at: offset)
            offset += chunk.count
        }
        #expect(offset == total)
        #expect(inOrder)
        let statistics = channel.statistics
        #expect(statistics.pauses >= 1)
        // At most the capacity plus one libcurl write (CURL_MAX_WRITE_SIZE, 16 KiB).
        #expect(statistics.maxBufferedBytes <= Self.capacity + 16_384)
    }

    @Test func streamWithoutBytesForTheIdleTimeoutThrowsStalled() async throws {
        let response = try await transport.stream(
            HTTPRequest(url: server.url("/stream?bytes=10&chunk=10&stall=1&id=idle")), idleTimeout: .milliseconds(300))
        var iterator = response.body.makeAsyncIterator()
        let first = try await iterator.next()
        #expect(first?.count == 10)
        await Self.expectStall(&iterator, idle: .milliseconds(300))
        let closed = try await transport.send(
            collecting: HTTPRequest(url: server.url("/await?event=closed-stream-idle")))
        #expect(closed.status == 200)
    }

    /// Bytes sent are activity: an upload longer than the idle timeout, which the server answers
    /// only once it has all of it, is not a stalled stream (CI's loaded run cut `exec`'s 50 MiB
    /// chunked upload so). The writer is paced on purpose: 8 pieces 0.6 s apart outlast the 2 s
    /// idle timeout more than twice. It runs on a thread of its own, not on the test process's
    /// cooperative pool, whose stalls under a full parallel run (FINDINGS §22) would make real
    /// gaps longer than the idle timeout.
    @Test func anUploadLongerThanTheIdleTimeoutIsNotAStall() async throws {
        let piece = [UInt8](repeating: 0x61, count: 4096)
        let upload = HTTPRequestBodyStream(length: piece.count * 8)
        var request = HTTPRequest(method: "POST", url: server.url("/headers"))
        request.bodyStream = upload
        let executor = ThreadExecutor()
        #expect(SystemThread.start(named: "relay-t-upload") { executor.run() })
        let writer = Task.detached(executorPreference: executor) {
            for _ in 0..<8 {
                _ = await upload.write(piece)
                try? await Task.sleep(for: .milliseconds(600))
            }
            upload.finish()
            executor.finish()
        }
        let response = try await transport.stream(request, idleTimeout: .seconds(2))
        var body: [UInt8] = []
        for try await chunk in response.body { body += chunk }
        await writer.value
        #expect(response.status == 200)
        let echoed = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        let length = (echoed?["body"] as? String).flatMap { Data(base64Encoded: $0) }.map {
            String(decoding: $0, as: UTF8.self)
        }
        #expect(length == "\(piece.count * 8)")
    }

    @Test func idleClockStopsWhileWeHavePausedTheTransfer() async throws {
        let total = 2 << 20
        let idle = Duration.milliseconds(400)
        let response = try await transport.stream(
            HTTPRequest(url: server.url("/stream?bytes=\(total)&chunk=65536&stall=1")), idleTimeout: idle)
        let channel = try #require(response.body.channel)
        var iterator = response.body.makeAsyncIterator()
        var received = try #require(try await iterator.next()).count
        await withSafetyNet { await channel.waitUntilPaused() }
        // Time passes while paused by us: this must not count as a stall.
        try await Task.sleep(for: idle * 3)
        while received < total, let chunk = try await iterator.next() { received += chunk.count }
        #expect(received == total)
        // Now the server really stalls.
        await Self.expectStall(&iterator, idle: idle)
    }

    @Test func cancellingTheConsumerRemovesTheTransfer() async throws {
        let response = try await transport.stream(
            HTTPRequest(url: server.url("/stream?bytes=5&chunk=5&stall=1&id=cancel")))
        let body = response.body
        let consumer = Task {
            var chunks = 0
            for try await _ in body { chunks += 1 }
            return chunks
        }
        // Wait until the consumer is parked for more data, then cancel it.
        consumer.cancel()
        await #expect(throws: HTTPError.cancelled) { _ = try await consumer.value }
        let closed = try await transport.send(
            collecting: HTTPRequest(url: server.url("/await?event=closed-stream-cancel")))
        #expect(closed.status == 200)
    }

    @Test func droppingTheBodyRemovesTheTransfer() async throws {
        do {
            let response = try await transport.stream(HTTPRequest(url: server.url("/stream?bytes=0&stall=1&id=drop")))
            #expect(response.status == 200)
        }
        let closed = try await transport.send(
            collecting: HTTPRequest(url: server.url("/await?event=closed-stream-drop")))
        #expect(closed.status == 200)
    }

    @Test func streamToARefusedPortThrowsTransport() async throws {
        await #expect(throws: HTTPError.self) {
            _ = try await transport.stream(HTTPRequest(url: "http://127.0.0.1:\(server.closedPort)/"))
        }
    }

    @Test func streamEndsCleanlyWhenTheServerFinishes() async throws {
        let response = try await transport.stream(HTTPRequest(url: server.url("/status/404")))
        #expect(response.status == 404)
        var body: [UInt8] = []
        for try await chunk in response.body { body += chunk }
        #expect(body == Array("status 404".utf8))
    }
}
