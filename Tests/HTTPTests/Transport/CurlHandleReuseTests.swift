import Foundation
import TestSupport
import Testing

@testable import TokenRelayHTTP

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

/// Connections opened by a burst stay open through a lull (fewer transfers attached) and serve
/// the next burst: libcurl's default cache (four per transfer attached at that moment) closed
/// them, and every burst after a lull opened its connections again.
@Suite struct CurlConnectionReuseTests {
    let server: TestServer

    init() async throws {
        server = try await TestServer()
    }

    /// The client ports of `count` requests the server holds until all of them have arrived, so
    /// each needs a connection of its own.
    func burst(_ transport: CurlTransport, key: String, count: Int) async throws -> Set<String> {
        try await withSafetyNet(seconds: 60) {
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        let response = try await transport.send(
                            collecting: HTTPRequest(url: server.url("/gather?key=\(key)&n=\(count)")))
                        #expect(response.status == 200)
                        return String(decoding: response.body, as: UTF8.self)
                    }
                }
                var ports: Set<String> = []
                for try await port in group { ports.insert(port) }
                return ports
            }
        }
    }

    @Test func aBurstAfterALullReusesTheConnectionsOfTheBurstBefore() async throws {
        let transport = try CurlTransport()
        let first = try await burst(transport, key: "first", count: 12)
        #expect(first.count == 12)
        // The lull: one transfer attached at a time (libcurl's default kept four connections).
        for index in 0..<3 {
            _ = try await burst(transport, key: "lull-\(index)", count: 1)
        }
        let second = try await burst(transport, key: "second", count: 12)
        #expect(second == first)
    }

    @Test func moreTransfersThanTheKeptNumberKeepTheirConnectionsToo() async throws {
        // Four per attached transfer when more are attached than the configured number: held to
        // the configured 2, the cache would close eight of the first burst's connections.
        let transport = try CurlTransport(options: .init(keptConnections: 2))
        let first = try await burst(transport, key: "first", count: 10)
        let second = try await burst(transport, key: "second", count: 10)
        #expect(first.count == 10 && second == first)
    }
}
