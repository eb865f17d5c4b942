import Foundation
import TestSupport
import Testing

@testable import TokenRelayHTTP

/// End-to-end tests of `CurlTransport` against the Python server on 127.0.0.1.
@Suite struct CurlTransportTests {
    let server: TestServer
    let transport: CurlTransport

    init() async throws {
        server = try await TestServer()
        transport = try CurlTransport(options: .init(maxResponseBytes: 1 << 20, streamBufferBytes: 64 << 10))
    }

    @Test func echoesMethodHeadersQueryAndBinaryBodyExactly() async throws {
        let body = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var headers = HTTPHeaders()
        headers.add(name: "X-Repeated", value: "one")
        headers.add(name: "X-Repeated", value: "two")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        let request = HTTPRequest(method: "PUT", url: server.url("/echo?a=1&b=%20x"), headers: headers, body: body)
        let response = try await transport.send(collecting: request)
        #expect(response.status == 200)
        let echo = try Echo(response)
        #expect(echo.method == "PUT")
        #expect(echo.path == "/echo?a=1&b=%20x")
        #expect(echo.values("X-Repeated") == ["one", "two"])
        #expect(echo.bodyBytes == body)
        #expect(echo.values("Expect").isEmpty)
        #expect(echo.values("User-Agent").isEmpty)
        #expect(echo.values("Content-Type") == ["application/octet-stream"])
        #expect(response.headers["content-type"] == "application/json")
    }

    @Test func largeUploadIsSentWithoutExpectContinue() async throws {
        let body = [UInt8](repeating: 0x61, count: 3 << 20)
        let echo = try Echo(
            try await transport.send(collecting: HTTPRequest(method: "POST", url: server.url("/headers"), body: body)))
        #expect(echo.values("Expect").isEmpty)
        #expect(echo.bodyBytes == Array(String(body.count).utf8))
    }

    @Test func postWithoutContentTypeSendsNone() async throws {
        let response = try await transport.send(
            collecting:
                HTTPRequest(method: "POST", url: server.url("/echo"), body: Array("a=b".utf8)))
        let echo = try Echo(response)
        #expect(echo.values("Content-Type").isEmpty)
        #expect(echo.values("Content-Length") == ["3"])
        #expect(echo.bodyBytes == Array("a=b".utf8))
    }

    @Test(arguments: [404, 500])
    func errorStatusesAreResponses(status: Int) async throws {
        let response = try await transport.send(collecting: HTTPRequest(url: server.url("/status/\(status)")))
        #expect(response.status == status)
        #expect(response.body == Array("status \(status)".utf8))
    }

    @Test func redirectIsReturnedAndItsTargetNeverContacted() async throws {
        let response = try await transport.send(collecting: HTTPRequest(url: server.url("/redirect")))
        #expect(response.status == 302)
        #expect(response.headers["Location"] == "http://127.0.0.1:\(server.otherPort)/contacted")
        let hits = try await transport.send(collecting: HTTPRequest(url: server.url("/other-hits")))
        #expect(hits.body == Array(#"{"hits": 0}"#.utf8))
    }

    @Test func cookiesAreNeverSentBack() async throws {
        let first = try await transport.send(collecting: HTTPRequest(url: server.url("/set-cookie")))
        #expect(first.headers.values(for: "set-cookie") == ["session=s3cr3t; Path=/"])
        let echo = try Echo(try await transport.send(collecting: HTTPRequest(url: server.url("/echo"))))
        #expect(echo.values("Cookie").isEmpty)
    }

    @Test func basicChallengeComesBackAsAResponse() async throws {
        let response = try await withSafetyNet { [transport, server] in
            try await transport.send(collecting: HTTPRequest(url: server.url("/basic-401")))
        }
        #expect(response.status == 401)
        #expect(response.headers["www-authenticate"] == #"Basic realm="test""#)
    }

    @Test func slowResponseTimesOut() async throws {
        // The slow route answers only after 30 s: a response instead of a timeout fails the test.
        await #expect(throws: HTTPError.timeout) {
            _ = try await transport.send(
                collecting: HTTPRequest(url: server.url("/slow?id=t"), timeout: .milliseconds(300)))
        }
    }

    @Test func cancellationRemovesTheTransferAndClosesTheConnection() async throws {
        let transport = self.transport, server = self.server
        let task = Task { try await transport.send(collecting: HTTPRequest(url: server.url("/slow?id=c"))) }
        let started = try await transport.send(collecting: HTTPRequest(url: server.url("/await?event=started-c")))
        #expect(started.status == 200)
        task.cancel()
        await #expect(throws: HTTPError.cancelled) { _ = try await task.value }
        let closed = try await transport.send(collecting: HTTPRequest(url: server.url("/await?event=closed-c")))
        #expect(closed.status == 200)
    }

    @Test(arguments: ["/large", "/large-chunked"])
    func bodyOverTheLimitFails(route: String) async throws {
        await #expect(throws: HTTPError.bodyTooLarge(limit: 1 << 20)) {
            _ = try await transport.send(collecting: HTTPRequest(url: server.url("\(route)?bytes=\(3 << 20)")))
        }
        let within = try await transport.send(collecting: HTTPRequest(url: server.url("\(route)?bytes=\(1 << 20)")))
        #expect(within.body.count == 1 << 20)
    }

    @Test func refusedConnectionIsATransportError() async throws {
        do {
            _ = try await transport.send(collecting: HTTPRequest(url: "http://127.0.0.1:\(server.closedPort)/"))
            Issue.record("expected a transport error")
        } catch let HTTPError.transport(reason) {
            #expect(!reason.isEmpty)
        }
    }

    @Test func transportErrorsNeverCarryHeaderValues() async throws {
        let canary = "canary-secret-4711"
        let request = HTTPRequest(
            url: "http://127.0.0.1:\(server.closedPort)/?x=1",
            headers: HTTPHeaders([("Authorization", "Bearer \(canary)")]))
        do {
            _ = try await transport.send(collecting: request)
            Issue.record("expected a transport error")
        } catch {
            #expect(!String(describing: error).contains(canary))
        }
    }

    @Test func explicitProxyIsUsed() async throws {
        let proxied = try CurlTransport(options: .init(proxy: "http://127.0.0.1:\(server.port)"))
        defer { proxied.shutdown() }
        let echo = try Echo(
            try await proxied.send(collecting: HTTPRequest(url: "http://origin.invalid/echo?via=proxy")))
        #expect(echo.path == "http://origin.invalid/echo?via=proxy")
        #expect(echo.values("Host") == ["origin.invalid"])
    }

    @Test func loopbackNeverGoesThroughAProxy() async throws {
        // The proxy is a closed port: used, the request would fail to connect.
        let proxied = try CurlTransport(options: .init(proxy: "http://127.0.0.1:\(server.closedPort)"))
        defer { proxied.shutdown() }
        let echo = try Echo(try await proxied.send(collecting: HTTPRequest(url: server.url("/echo?direct=1"))))
        #expect(echo.path == "/echo?direct=1")
        do {
            _ = try await proxied.send(collecting: HTTPRequest(url: "http://origin.invalid/echo"))
            Issue.record("a non-loopback destination must go through the (closed) proxy")
        } catch let HTTPError.transport(reason) {
            #expect(!reason.isEmpty)
        }
    }

    @Test(arguments: ["Content-Length", "Transfer-Encoding", "Host", "Connection", "Proxy-Authorization", ":path"])
    func framingAndHopByHopHeadersAreRefusedAsInvalidRequests(name: String) async throws {
        let request = HTTPRequest(
            method: "POST", url: server.url("/echo"), headers: HTTPHeaders([(name, "0")]), body: Array("x".utf8))
        do {
            _ = try await transport.send(collecting: request)
            Issue.record("\(name) must be refused")
        } catch let HTTPError.invalidRequest(reason) {
            #expect(reason.contains(name))
        }
    }

    @Test func tlsIsVerifiedAgainstTheSystemStoreByDefaultAndAFailureIsATLSError() async throws {
        do {
            _ = try await transport.send(collecting: HTTPRequest(url: "https://127.0.0.1:\(server.tlsPort)/echo"))
            Issue.record("a self-signed certificate must not be accepted")
        } catch let HTTPError.tls(reason) {
            #expect(!reason.isEmpty)
        }
    }

    @Test func caFileTrustsAPrivateCertificate() async throws {
        let trusting = try CurlTransport(options: .init(caFile: TestServer.certificatePath))
        defer { trusting.shutdown() }
        let echo = try Echo(
            try await trusting.send(collecting: HTTPRequest(url: "https://127.0.0.1:\(server.tlsPort)/echo?tls=1")))
        #expect(echo.path == "/echo?tls=1")
    }

    @Test func unsupportedSchemeIsRejected() async throws {
        await #expect(throws: HTTPError.self) {
            _ = try await transport.send(collecting: HTTPRequest(url: "file:///etc/passwd"))
        }
    }

    @Test func headerValuesWithLineBreaksAreRejected() async throws {
        var headers = HTTPHeaders()
        headers.add(name: "X-Bad", value: "a\r\nInjected: yes")
        await #expect(throws: HTTPError.self) {
            _ = try await transport.send(collecting: HTTPRequest(url: server.url("/echo"), headers: headers))
        }
    }

    @Test func twoHundredConcurrentSendsAllSucceed() async throws {
        let transport = self.transport, server = self.server
        let statuses = try await withSafetyNet(seconds: 60) {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let response = try await transport.send(
                            collecting: HTTPRequest(url: server.url("/echo?i=\(index)")))
                        return try Echo(response).path == "/echo?i=\(index)" ? response.status : -1
                    }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
        }
        #expect(statuses.count == 200)
        #expect(statuses.allSatisfy { $0 == 200 })
    }

    @Test func headAndBodylessDeleteAreSentAsSuch() async throws {
        let head = try await transport.send(collecting: HTTPRequest(method: "HEAD", url: server.url("/echo")))
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        let delete = try Echo(
            try await transport.send(collecting: HTTPRequest(method: "DELETE", url: server.url("/echo"))))
        #expect(delete.method == "DELETE")
        #expect(delete.values("Content-Length").isEmpty)
        let post = try Echo(try await transport.send(collecting: HTTPRequest(method: "POST", url: server.url("/echo"))))
        #expect(post.values("Content-Length") == ["0"])
    }

    @Test func shutdownFailsTransfersInFlight() async throws {
        let transport = try CurlTransport()
        let server = self.server
        let task = Task { try await transport.send(collecting: HTTPRequest(url: server.url("/slow?id=s"))) }
        #expect(
            try await self.transport.send(collecting: HTTPRequest(url: server.url("/await?event=started-s"))).status
                == 200)
        transport.shutdown()
        await #expect(throws: HTTPError.cancelled) { _ = try await task.value }
    }

    /// Credentials by origin are Auth's (CredentialsMiddlewareTests); the environment's headers are
    /// HTTP's own.
    @Test func clientAttachesEnvironmentHeadersOnlyToTheEnvironmentOrigin() async throws {
        let policy = OriginPolicy(baseURL: server.url("/"))
        let client = HTTPClient(
            transport: transport,
            middlewares: [
                LoggingMiddleware(),
                EnvironmentHeadersMiddleware(headers: HTTPHeaders([("X-Env", "1")]), origins: policy),
            ])
        let same = try Echo(try await client.send(collecting: HTTPRequest(url: server.url("/echo"))))
        #expect(same.values("X-Env") == ["1"])
        let other = try Echo(
            try await client.send(collecting: HTTPRequest(url: "http://localhost:\(server.port)/echo")))
        #expect(other.values("X-Env").isEmpty)
    }

    @Test func shutdownFailsLaterRequests() async throws {
        let transport = try CurlTransport()
        transport.shutdown()
        await #expect(throws: HTTPError.cancelled) {
            _ = try await transport.send(collecting: HTTPRequest(url: server.url("/echo")))
        }
    }
}
