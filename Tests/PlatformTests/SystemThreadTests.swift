import Dispatch
import Glibc
import Synchronization
import Testing

@testable import TokenRelayPlatform

@Suite struct SystemThreadTests {
    @Test func theBodyRunsOnANewThreadThatCarriesItsName() throws {
        let seen = Mutex<(name: String?, sameThread: Bool)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let caller = pthread_self()
        let started = SystemThread.start(named: "relay-test-thrd") {
            seen.withLock { $0 = (ThreadName.current, pthread_equal(pthread_self(), caller) != 0) }
            done.signal()
        }
        #expect(started)
        #expect(done.wait(timeout: .now() + 60) == .success)
        let result = try #require(seen.withLock { $0 })
        #expect(result.name == "relay-test-thrd")
        #expect(!result.sameThread)
    }

    @Test func aLongNameIsCutToTheFifteenBytesTheSystemKeeps() throws {
        let name = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        #expect(
            SystemThread.start(named: "relay-a-name-longer-than-fifteen") {
                name.withLock { $0 = ThreadName.current }
                done.signal()
            })
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(name.withLock { $0 } == "relay-a-name-lo")
    }
}
