import Testing

@testable import TokenRelayHTTP

/// Buffered callers collect a response's body; the limit holds for streamed bodies too.
@Suite struct HTTPStreamingResponseTests {
    static func streamed(_ chunks: [[UInt8]]) -> HTTPStreamingResponse {
        let body = AsyncThrowingStream<[UInt8], any Error> { continuation in
            for chunk in chunks { continuation.yield(chunk) }
            continuation.finish()
        }
        return HTTPStreamingResponse(status: 200, body: HTTPByteStream(body))
    }

    @Test func aWholeBodyIsCollectedAsItIs() async throws {
        let response = HTTPStreamingResponse(HTTPResponse(status: 201, body: [1, 2, 3]))
        let collected = try await response.collect()
        #expect(collected.status == 201 && collected.body == [1, 2, 3])
        await #expect(throws: HTTPError.bodyTooLarge(limit: 2)) { _ = try await response.collect(upTo: 2) }
    }

    @Test func aStreamedBodyIsCollectedUpToTheLimit() async throws {
        #expect(try await Self.streamed([[1, 2], [3]]).collect(upTo: 3).body == [1, 2, 3])
        await #expect(throws: HTTPError.bodyTooLarge(limit: 3)) {
            _ = try await Self.streamed([[1, 2], [3, 4]]).collect(upTo: 3)
        }
    }

    @Test func anEmptyWholeBodyHasNoChunk() async throws {
        var iterator = HTTPByteStream(bytes: []).makeAsyncIterator()
        #expect(try await iterator.next() == nil)
    }
}
