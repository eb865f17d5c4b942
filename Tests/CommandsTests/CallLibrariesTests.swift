import Dispatch
import Testing
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

@testable import TokenRelayCommands

/// `call`'s library loading thread (`OneShot.CallLibraries`) ends whether the call proceeds
/// (libcurl loaded) or ends first (bad params): it never waits forever.
@Suite struct CallLibrariesTests {
    @Test func aCallThatProceedsLoadsLibcurlAndTheThreadEnds() {
        let ended = DispatchSemaphore(value: 0)
        let libraries = OneShot.CallLibraries.startLoading(whenDone: { ended.signal() })
        libraries.proceed()
        #expect(ended.wait(timeout: .now() + 60) == .success)
        #expect(CurlTransport.loadLibrary())
        withExtendedLifetime(libraries) {}
    }

    @Test func aCallWaitsForLibcurlWithoutHoldingItsThread() {
        // One thread runs both tasks: the second runs only if the first's wait leaves it free.
        let executor = ThreadExecutor()
        #expect(SystemThread.start(named: "test-executor") { executor.run() })
        defer { executor.finish() }
        let libraries = OneShot.CallLibraries.startLoading()
        let waiting = DispatchSemaphore(value: 0)
        let otherRan = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: executor) {
            waiting.signal()
            await libraries.loaded()  // not loaded: the call has not proceeded yet
            done.signal()
        }
        #expect(waiting.wait(timeout: .now() + 60) == .success)
        Task(executorPreference: executor) { otherRan.signal() }
        #expect(otherRan.wait(timeout: .now() + 60) == .success)
        #expect(done.wait(timeout: .now()) == .timedOut)
        libraries.proceed()
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(CurlTransport.loadLibrary())
    }

    @Test func aCallThatEndsBeforeItProceedsLeavesNoThreadWaiting() {
        let ended = DispatchSemaphore(value: 0)
        do {
            let libraries = OneShot.CallLibraries.startLoading(whenDone: { ended.signal() })
            // Held: the thread waits for the call (after libcrypto) and does not end.
            #expect(ended.wait(timeout: .now() + .milliseconds(200)) == .timedOut)
            withExtendedLifetime(libraries) {}
        }
        #expect(ended.wait(timeout: .now() + 60) == .success)
    }
}
