import HTTP
import TestSupport
import Testing

@testable import Relay

/// `call`'s library loading thread (`OneShot.CallLibraries`) ends whether the call proceeds
/// (libcurl loaded) or ends first (bad params): it never waits forever. Serialized: the tests
/// count the one thread of that name in the test process.
@Suite(.serialized) struct CallLibrariesTests {
    static let threadName = "relay-lib-load"

    @Test func aCallThatProceedsLoadsLibcurlAndTheThreadEnds() {
        do {
            let libraries = OneShot.CallLibraries.startLoading()
            libraries.proceed()
            #expect(ProcessThreads.wait { ProcessThreads.count(named: Self.threadName) == 0 })
        }
        #expect(CurlTransport.loadLibrary())
    }

    @Test func aCallThatEndsBeforeItProceedsLeavesNoThreadWaiting() {
        do {
            let libraries = OneShot.CallLibraries.startLoading()
            // The thread is waiting for the call (or still loading libcrypto).
            #expect(ProcessThreads.wait { ProcessThreads.count(named: Self.threadName) == 1 })
            withExtendedLifetime(libraries) {}
        }
        #expect(ProcessThreads.wait { ProcessThreads.count(named: Self.threadName) == 0 })
    }
}
