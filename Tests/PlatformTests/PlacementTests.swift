import Dispatch
import Glibc
import Synchronization
import Testing

@testable import TokenRelayPlatform

/// Where ``Placement`` starts a task of each ``Placement/Place``.
@Suite struct PlacementTests {
    /// Runs `body` as a task on a thread of its own (playing the binary's main thread, whose
    /// executor a task started there inherits), and returns that thread and what `body` returned.
    static func onAThreadOfItsOwn(_ body: @escaping @Sendable (ThreadExecutor) async -> [pthread_t]) async
        -> (thread: pthread_t, seen: [pthread_t])?
    {
        final class Box: Sendable { let value = Mutex<(pthread_t, [pthread_t])?>(nil) }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let started = SystemThread.start(named: "relay-t-place") {
            let executor = ThreadExecutor()
            let thread = pthread_self()
            Task.detached(executorPreference: executor) {
                let seen = await body(executor)
                box.value.withLock { $0 = (thread, seen) }
                executor.finish()
            }
            executor.run()
            done.signal()
        }
        guard started else { return nil }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                done.wait()
                continuation.resume()
            }
        }
        return box.value.withLock { $0 }
    }

    @Test func eachPlaceRunsWhereItSays() async throws {
        let result = try #require(
            await Self.onAThreadOfItsOwn { executor in
                let pool = await Placement.task(.pool) { pthread_self() }.value
                let detachedPool = await Placement.detached(.pool) { pthread_self() }.value
                let given = await Placement.task(.executor(executor)) { pthread_self() }.value
                let own = await Placement.withOwnTasks(on: executor) { Placement.task { pthread_self() } }.value
                let throwing = try? await Placement.throwingTask(.executor(executor)) { pthread_self() }.value
                return [pool, detachedPool, given, own, throwing ?? pthread_self()]
            })
        let (thread, seen) = result
        #expect(pthread_equal(seen[0], thread) == 0, ".pool leaves the starter's thread")
        #expect(pthread_equal(seen[1], thread) == 0, "detached .pool leaves the starter's thread")
        #expect(pthread_equal(seen[2], thread) != 0, ".executor runs on that executor")
        #expect(pthread_equal(seen[3], thread) != 0, ".ownTasks runs where own tasks run")
        #expect(pthread_equal(seen[4], thread) != 0, "a throwing task keeps its place")
    }
}
