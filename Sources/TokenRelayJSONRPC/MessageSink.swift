import Synchronization

/// Where serialized messages go (the stdout writer in the server; a recorder in tests).
/// Messages are written whole and in the order they were handed over.
public protocol MessageSink: Sendable {
    /// Hands over one serialized JSON message, suspending while the output is backed up
    /// (back-pressure for a slow peer).
    func send(_ message: consuming [UInt8]) async

    /// Hands over one serialized JSON message without waiting (and never drops it). For the
    /// stdin reader (its thread, or the transfer loop reading stdin), which must not block in the
    /// middle of a frame; it waits for room before its next read instead
    /// (``StdioWriter/hasRoom(orWhenRoom:)``).
    func sendNow(_ message: consuming [UInt8])
}

/// A one-shot signal that tasks can wait for (e.g. "the reply has been handed to the writer").
public final class OneShotSignal: Sendable {
    private enum State {
        case pending([CheckedContinuation<Void, Never>])
        case fired
    }

    /// Guarded by the mutex.
    private let state = Mutex(State.pending([]))

    public init() {}

    /// Fires the signal; every current and future waiter proceeds.
    public func fire() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            guard case .pending(let waiters) = state else { return [] }
            state = .fired
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether the signal has fired.
    public var hasFired: Bool {
        state.withLock { if case .fired = $0 { true } else { false } }
    }

    /// Waits until the signal fires or `bound` has passed, whichever comes first (past the
    /// bound the signal is fired: it is one-shot, and no waiter is left behind).
    public func wait(atMost bound: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait() }
            group.addTask { try? await Task.sleep(for: bound) }
            await group.next()
            group.cancelAll()
            fire()
        }
    }

    /// Waits until the signal fires (returns at once if it has).
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow: Bool = state.withLock { state in
                switch state {
                case .fired: return true
                case .pending(var waiters):
                    waiters.append(continuation)
                    state = .pending(waiters)
                    return false
                }
            }
            if resumeNow { continuation.resume() }
        }
    }
}
