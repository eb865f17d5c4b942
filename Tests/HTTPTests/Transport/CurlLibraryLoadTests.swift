import Foundation
import Testing
import TokenRelayLogging
import TokenRelayPlatform

@testable import TokenRelayHTTP

/// `CurlTransport.loadLibrary()` may run on a thread of its own while the caller goes on (`call`
/// loads libcurl so while it prepares its request); a transport made at the same time waits for
/// that one initialisation instead of running a second.
@Suite(.timeLimit(.minutes(5))) struct CurlLibraryLoadTests {
    @Test func loadsRacingATransportsCreationLeaveOneWorkingLibrary() async throws {
        let server = try await TestServer()
        for _ in 0..<8 { SystemThread.start(named: "relay-test-load") { CurlTransport.loadLibrary() } }
        let transport = try CurlTransport()
        #expect(CurlEventLoop.isLibraryReady)
        #expect(CurlTransport.loadLibrary())
        let response = try await transport.send(collecting: HTTPRequest(method: "GET", url: server.url("/echo")))
        #expect(response.status == 200)
    }
}
