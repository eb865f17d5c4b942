import Foundation
import Testing

@testable import HTTP

/// A pooled easy handle is not reset between transfers (only the per-transfer options are set
/// again): nothing of one request may leak into the next sent on the same handle. Requests are
/// sent one after the other, so each reuses the one pooled handle.
@Suite struct CurlHandleReuseTests {
    let server: TestServer
    let transport: CurlTransport

    init() async throws {
        server = try await TestServer()
        transport = try CurlTransport(options: .init(maxResponseBytes: 1 << 10, streamBufferBytes: 64 << 10))
    }

    func echo(_ method: String, body: [UInt8]? = nil, headers: HTTPHeaders = HTTPHeaders()) async throws -> Echo {
        let response = try await transport.send(
            collecting: HTTPRequest(method: method, url: server.url("/echo"), headers: headers, body: body))
        #expect(response.status == 200)
        return try Echo(response)
    }

    @Test func eachRequestOnAReusedHandleGoesWithItsOwnMethodBodyAndHeadersOnly() async throws {
        var headers = HTTPHeaders()
        headers.add(name: "X-First", value: "1")
        let put = try await echo("PUT", body: Array("first body".utf8), headers: headers)
        #expect(put.method == "PUT" && put.bodyBytes == Array("first body".utf8) && put.values("X-First") == ["1"])

        let get = try await echo("GET")
        #expect(get.method == "GET" && get.bodyBytes.isEmpty)
        #expect(get.values("X-First").isEmpty && get.values("Content-Length").isEmpty)

        let head = try await transport.send(collecting: HTTPRequest(method: "HEAD", url: server.url("/echo")))
        #expect(head.status == 200 && head.body.isEmpty)
        // After HEAD a GET has its body again (HEAD's no-body does not stick).
        #expect(try await echo("GET").method == "GET")

        // A method without a body after one with a body: the earlier body is not sent again.
        _ = try await echo("POST", body: Array("second body".utf8))
        let delete = try await echo("DELETE")
        #expect(delete.method == "DELETE" && delete.bodyBytes.isEmpty && delete.values("Content-Length").isEmpty)

        let emptyPost = try await echo("POST", body: [])
        #expect(
            emptyPost.method == "POST" && emptyPost.bodyBytes.isEmpty && emptyPost.values("Content-Length") == ["0"])
        let patch = try await echo("PATCH", body: Array("third".utf8))
        #expect(patch.method == "PATCH" && patch.bodyBytes == Array("third".utf8))
        #expect(try await echo("GET").method == "GET")
    }

    @Test func aStreamAfterABufferedRequestIsNotHeldToTheBufferedBodyLimitOrTimeout() async throws {
        // Buffered: a 1 KiB limit and a 60 s bound on this transfer.
        let small = try await transport.send(
            collecting: HTTPRequest(url: server.url("/large?bytes=100"), timeout: .seconds(60)))
        #expect(small.status == 200 && small.body.count == 100)
        // Streamed on the same handle: no body limit (the 1 KiB would fail it) and no total bound.
        // (With a Content-Length: libcurl enforces its size limit when the size is announced.)
        let stream = try await transport.stream(HTTPRequest(url: server.url("/large?bytes=200000")))
        #expect(stream.status == 200)
        var count = 0
        for try await chunk in stream.body { count += chunk.count }
        #expect(count == 200_000)
        // And back: the buffered limit applies again.
        await #expect(throws: HTTPError.bodyTooLarge(limit: 1 << 10)) {
            _ = try await transport.send(collecting: HTTPRequest(url: server.url("/large?bytes=5000")))
        }
    }
}
