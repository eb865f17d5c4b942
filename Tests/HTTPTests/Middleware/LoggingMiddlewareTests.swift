import Foundation
import Testing
import TokenRelayLogging

@testable import TokenRelayHTTP

@Suite struct LoggingMiddlewareTests {
    @Test func secretQueryParametersAndPasswordsAreMasked() {
        let middleware = LoggingMiddleware(secretQueryParameters: ["X-Sig"])
        #expect(
            middleware.redactedURL("https://u:pw@h/p?access_token=abc&x%2Dsig=1&page=2&API_KEY=z#frag")
                == "https://u:[REDACTED]@h/p?access_token=[REDACTED]&x%2Dsig=[REDACTED]&page=2&API_KEY=[REDACTED]")
        #expect(middleware.redactedURL("https://h/p") == "https://h/p")
    }

    @Test func credentialHeadersAreMasked() {
        let middleware = LoggingMiddleware(secretHeaders: ["X-Api-Key"])
        let headers = HTTPHeaders([
            ("authorization", "Bearer t"), ("Proxy-Authorization", "Basic b"), ("Cookie", "c=1"), ("Set-Cookie", "s=1"),
            ("x-api-key", "k"), ("DPoP", "eyJ0eXAiOiJkcG9wK2p3dCJ9.e30.c2ln"), ("Accept", "*/*"),
        ])
        #expect(middleware.redactedFields(headers).map(\.1) == Array(repeating: "[REDACTED]", count: 6) + ["*/*"])
    }

    @Test func traceLinesNeverContainTheCanaryOrBodies() async throws {
        let pipe = Pipe()
        let logger = Logger(redactor: Redactor(), fileDescriptor: pipe.fileHandleForWriting.fileDescriptor)
        logger.configure(level: .trace, format: .text)
        let canary = "canary-7f3a9"
        let transport = FakeTransport([
            HTTPResponse(
                status: 200, headers: HTTPHeaders([("Set-Cookie", canary)]), body: Array("body-\(canary)".utf8))
        ])
        let client = HTTPClient(
            transport: transport, middlewares: [LoggingMiddleware(secretHeaders: ["X-Api-Key"], logger: logger)])
        let request = HTTPRequest(
            method: "POST", url: "https://h/p?api_key=\(canary)&page=1",
            headers: HTTPHeaders([("X-Api-Key", canary), ("Authorization", "Bearer \(canary)")]),
            body: Array(canary.utf8))
        let response = try await client.send(collecting: request)
        #expect(response.status == 200)
        logger.flush()  // lines are written by the logger's own thread
        try pipe.fileHandleForWriting.close()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(output.contains("http request"))
        #expect(output.contains("status=200"))
        #expect(output.contains("page=1"))
        #expect(!output.contains(canary))
    }

    @Test func streamedConnectionsAreLoggedLikeRequestsWithoutTheCanary() async throws {
        let pipe = Pipe()
        let logger = Logger(redactor: Redactor(), fileDescriptor: pipe.fileHandleForWriting.fileDescriptor)
        logger.configure(level: .trace, format: .text)
        let canary = "canary-5d21c"
        let client = HTTPClient(transport: FakeTransport(), middlewares: [LoggingMiddleware(logger: logger)])
        let request = HTTPRequest(
            url: "https://h/events?access_token=\(canary)",
            headers: HTTPHeaders([("Authorization", "Bearer \(canary)")]))
        _ = try await client.stream(request, idleTimeout: .seconds(5))
        logger.flush()
        try pipe.fileHandleForWriting.close()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(output.contains("http request") && output.contains("stream=yes"))
        #expect(output.contains("http response") && output.contains("status=200"))
        #expect(!output.contains(canary))
    }
}
