import Dispatch
import HTTP
import Testing

@testable import Relay

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

    @Test func aCallWaitsForLibcurlWithoutHoldingItsThread() async {
        let libraries = OneShot.CallLibraries.startLoading()
        libraries.proceed()
        await libraries.loaded()
        #expect(CurlTransport.loadLibrary())
        // Loaded already: returns at once.
        await libraries.loaded()
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
