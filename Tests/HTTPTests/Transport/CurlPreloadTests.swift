import Foundation
import Testing

@testable import HTTP

/// `CurlTransport.preload()` loads libcurl on a thread of its own while the caller goes on
/// (`call` reads its configuration meanwhile); a transport made at the same time waits for that
/// one initialisation instead of running a second.
@Suite(.timeLimit(.minutes(1))) struct CurlPreloadTests {
    @Test func preloadsRacingATransportsCreationLeaveOneWorkingLibrary() async throws {
        let server = try await TestServer()
        for _ in 0..<8 { CurlTransport.preload() }
        let transport = try CurlTransport()
        #expect(CurlEventLoop.isLibraryReady)
        let response = try await transport.send(collecting: HTTPRequest(method: "GET", url: server.url("/echo")))
        #expect(response.status == 200)
    }
}
