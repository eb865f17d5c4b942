import Foundation
import TestSupport
import Testing
import TokenRelayLogging
import TokenRelayPlatform

@testable import TokenRelayHTTP

/// The curl loop as a task executor (``CurlTransport/executor``): a task that prefers it runs
/// on the loop thread, its transfer included, and no job is lost once the loop has stopped.
@Suite struct CurlLoopExecutorTests {
    @Test func aTaskPreferringTheLoopRunsBeforeAndAfterItsTransferOnTheLoopThread() async throws {
        let server = try await TestServer()
        let transport = try CurlTransport()
        defer { transport.shutdown() }
        let task = Task(executorPreference: transport.executor) {
            let before = ThreadName.current
            let response = try await transport.send(collecting: HTTPRequest(method: "GET", url: server.url("/echo")))
            return (before, ThreadName.current, response.status)
        }
        let (before, after, status) = try await withSafetyNet { try await task.value }
        #expect(status == 200)
        #expect(before == CurlEventLoop.threadName)
        #expect(after == CurlEventLoop.threadName)
    }

    @Test func afterShutdownATaskPreferringTheLoopStillRunsAndItsTransferIsCancelled() async throws {
        let server = try await TestServer()
        let transport = try CurlTransport()
        transport.shutdown()
        let task = Task(executorPreference: transport.executor) { () -> (String?, Bool) in
            let name = ThreadName.current
            do {
                _ = try await transport.send(collecting: HTTPRequest(method: "GET", url: server.url("/echo")))
                return (name, false)
            } catch HTTPError.cancelled {
                return (name, true)
            }
        }
        let (name, cancelled) = try await withSafetyNet { try await task.value }
        #expect(name != CurlEventLoop.threadName)
        #expect(cancelled)
    }
}
