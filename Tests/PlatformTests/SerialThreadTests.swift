import Dispatch
import Glibc
import Synchronization
import Testing

@testable import TokenRelayPlatform

@Suite struct SerialThreadTests {
    @Test func jobsRunInOrderOnOneNamedThreadThatIsNotTheCallers() throws {
        let thread = SerialThread(named: "relay-test-ser")
        let seen = Mutex<[(index: Int, thread: pthread_t, name: String?)]>([])
        let done = DispatchSemaphore(value: 0)
        for index in 0..<200 {
            thread.async {
                seen.withLock { $0.append((index, pthread_self(), ThreadName.current)) }
                if index == 199 { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 60) == .success)
        let runs = seen.withLock { $0 }
        #expect(runs.map(\.index) == Array(0..<200))
        let first = try #require(runs.first)
        #expect(runs.allSatisfy { pthread_equal($0.thread, first.thread) != 0 })
        #expect(pthread_equal(first.thread, pthread_self()) == 0)
        #expect(first.name == "relay-test-ser")
    }

    @Test func startMakesTheThreadBeforeAnyJobAndItEndsOnceTheOwnerIsGone() {
        // start() makes the thread now, so that a job given later (while, say, a dlopen holds the
        // lock no new thread can be made without) finds it.
        let started = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        do {
            let thread = SerialThread(
                named: "relay-t-start", observer: .init(started: { started.signal() }, ended: { ended.signal() }))
            thread.start()
            thread.start()
            #expect(started.wait(timeout: .now() + 60) == .success)
            let done = DispatchSemaphore(value: 0)
            thread.async { done.signal() }
            #expect(done.wait(timeout: .now() + 60) == .success)
            #expect(ended.wait(timeout: .now()) == .timedOut)  // alive while its owner is
        }
        #expect(ended.wait(timeout: .now() + 60) == .success)
        #expect(started.wait(timeout: .now()) == .timedOut)  // one thread for both starts
    }

    @Test func jobsGivenBeforeTheOwnerGoesStillRun() {
        // A store queues a lease's release without waiting and may be released right after.
        let gate = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let count = Mutex(0)
        do {
            let thread = SerialThread(named: "relay-test-ser")
            thread.async { gate.wait() }
            for _ in 0..<10 { thread.async { count.withLock { $0 += 1 } } }
            thread.async { done.signal() }
        }
        gate.signal()
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(count.withLock { $0 } == 10)
    }
}
