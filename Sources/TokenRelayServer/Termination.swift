import Synchronization

/// Why the server stops.
public enum TerminationReason: Sendable, Equatable {
    /// stdin reached end of input.
    case endOfInput
    /// SIGTERM, SIGINT or SIGQUIT.
    case signal(Int32)
    /// The `exit` notification; `afterShutdown` tells whether the `shutdown` request was read
    /// before it (decided by the dispatcher in read order), which makes the exit code 0.
    case exitNotification(afterShutdown: Bool)
    /// stdout was closed by the peer (EPIPE).
    case peerGone
    /// The parent process named in `initialize` died.
    case parentDied
}

/// The first reason to stop wins; `wait()` returns it.
final class Termination: Sendable {
    private struct State {
        var reason: TerminationReason?
        var waiters: [CheckedContinuation<TerminationReason, Never>] = []
    }

    /// Guarded by the mutex.
    private let state = Mutex(State())

    func trigger(_ reason: TerminationReason) {
        let waiters: [CheckedContinuation<TerminationReason, Never>] = state.withLock { state in
            guard state.reason == nil else { return [] }
            state.reason = reason
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: reason) }
    }

    func wait() async -> TerminationReason {
        await withCheckedContinuation { continuation in
            let reason: TerminationReason? = state.withLock { state in
                if let reason = state.reason { return reason }
                state.waiters.append(continuation)
                return nil
            }
            if let reason { continuation.resume(returning: reason) }
        }
    }
}
