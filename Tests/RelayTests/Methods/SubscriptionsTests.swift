import Synchronization
import Testing

@testable import TokenRelayJSONRPC
@testable import TokenRelayServer

/// ``SubscriptionRegistry``: closing and registering are one critical section, so a subscribe
/// that arrives while a close is in progress is refused and never leaves a stream running.
@Suite struct SubscriptionsTests {
    /// A subscription task that runs until cancelled, counting how many were started.
    final class Streams: Sendable {
        private let started = Mutex(0)
        var count: Int { started.withLock { $0 } }

        /// The tasks a close took.
        final class Taken: Sendable {
            let tasks = Mutex<[Task<Void, Never>]>([])
        }

        func start() -> Task<Void, Never> {
            started.withLock { $0 += 1 }
            return Task.detached {
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            }
        }
    }

    @Test func aSubscribeArrivingWhileTheCloseIsHeldIsRefusedAndStartsNothing() async throws {
        let registry = SubscriptionRegistry()
        let streams = Streams()
        let first = try registry.register(environment: "e", profile: nil, isCurrent: { true }) { _ in streams.start() }
        #expect(first == "sub-1")

        // The close is held at its gate: new subscriptions are refused, the running ones not yet cancelled.
        let closing = registry.close()
        #expect(closing.count == 1)
        #expect(registry.count == 0)
        var refusal: RPCError?
        do {
            _ = try registry.register(environment: "e", profile: nil, isCurrent: { true }) { _ in streams.start() }
        } catch {
            refusal = error
        }
        #expect(refusal?.code == .shuttingDown)
        #expect(refusal?.message.contains("shutting down") == true)
        #expect(streams.count == 1, "a refused subscribe started a stream")

        // The gate opens: the close cancels what it took, and nothing is left running.
        for task in closing { task.cancel() }
        for task in closing { await task.value }
        #expect(registry.count == 0)
    }

    @Test func subscribesRacingACloseAreEitherClosedByItOrRefused() async throws {
        let registry = SubscriptionRegistry()
        let streams = Streams()
        let closed = Streams.Taken()
        let outcomes = await withTaskGroup(of: RPCError?.self) { group in
            for index in 0..<200 {
                if index == 100 {
                    group.addTask {
                        let tasks = registry.close()
                        closed.tasks.withLock { $0 = tasks }
                        return nil
                    }
                }
                group.addTask {
                    do throws(RPCError) {
                        _ = try registry.register(environment: "e", profile: nil, isCurrent: { true }) { _ in
                            streams.start()
                        }
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            var refusals: [RPCError] = []
            for await case let refusal? in group { refusals.append(refusal) }
            return refusals
        }
        let taken = closed.tasks.withLock { $0 }
        #expect(outcomes.allSatisfy { $0.code == .shuttingDown })
        // Every stream that was started is one the close took; every other subscribe was refused.
        #expect(taken.count == streams.count)
        #expect(taken.count + outcomes.count == 200)
        #expect(registry.count == 0)
        for task in taken { task.cancel() }
        for task in taken { await task.value }
    }

    @Test func aSubscribeOnAReplacedRuntimeStartsNothing() throws {
        let registry = SubscriptionRegistry()
        let streams = Streams()
        let id = try registry.register(environment: "e", profile: nil, isCurrent: { false }) { _ in streams.start() }
        #expect(id == nil)
        #expect(streams.count == 0)
        #expect(registry.count == 0)
    }
}
