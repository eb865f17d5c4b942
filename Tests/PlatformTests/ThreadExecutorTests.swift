import Dispatch
import Glibc
import Synchronization
import Testing

@testable import TokenRelayPlatform

@Suite struct ThreadExecutorTests {
    /// Where a task's steps ran, and the value it reached.
    final class Trace: Sendable {
        let threads = Mutex<[pthread_t]>([])
        let result = Mutex<Int?>(nil)
        let indices = Mutex<[Int]>([])
        func here() { threads.withLock { $0.append(pthread_self()) } }
    }

    @Test func aTaskThatPrefersItRunsEveryStepOnTheThreadThatRunsIt() async throws {
        let trace = Trace()
        let runner = Mutex<pthread_t?>(nil)
        let returned = DispatchSemaphore(value: 0)
        // The thread that calls run() plays the main thread.
        let started = SystemThread.start(named: "relay-t-exec") {
            runner.withLock { $0 = pthread_self() }
            let executor = ThreadExecutor()
            Task.detached(executorPreference: executor) {
                trace.here()
                // A suspension that resumes from another thread (a timer of the global
                // executor's), and a child task, which inherits the preference.
                try? await Task.sleep(for: .milliseconds(1))
                trace.here()
                async let child: Int = {
                    trace.here()
                    return 41
                }()
                let value = await child + 1
                trace.here()
                trace.result.withLock { $0 = value }
                executor.finish()
            }
            executor.run()
            returned.signal()
        }
        #expect(started)
        #expect(returned.wait(timeout: .now() + 60) == .success)
        let thread = try #require(runner.withLock { $0 })
        let threads = trace.threads.withLock { $0 }
        #expect(threads.count == 4)
        #expect(threads.allSatisfy { pthread_equal($0, thread) != 0 })
        #expect(trace.result.withLock { $0 } == 42)
    }

    @Test(.timeLimit(.minutes(5))) func jobsRunInTheOrderGivenAndRunReturnsOnlyAfterFinish() {
        let executor = ThreadExecutor()
        let trace = Trace()
        for index in 0..<100 {
            Task.detached(executorPreference: executor) { [trace] in
                trace.here()
                trace.indices.withLock { $0.append(index) }
                if index == 99 {
                    trace.result.withLock { $0 = index }
                    executor.finish()
                }
            }
        }
        // On this thread: every job given before finish() runs, in order, and run() returns
        // only once the last one has asked it to.
        executor.run()
        #expect(trace.result.withLock { $0 } == 99)
        let threads = trace.threads.withLock { $0 }
        #expect(trace.indices.withLock { $0 } == Array(0..<100))
        #expect(threads.allSatisfy { pthread_equal($0, pthread_self()) != 0 })
    }
}
