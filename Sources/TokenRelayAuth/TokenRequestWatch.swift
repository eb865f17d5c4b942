import Synchronization

/// Tells the process, once, that a token request is about to go out: from then on, ending the
/// process at once would lose the answer (a rotated refresh token) the server is about to give.
/// A one-shot command uses this to take over the stopping signals only then
/// (`CommandLineTool.interruptible`), so a command that sends no token request (a stored token)
/// keeps the signals' default actions and starts no signal-handling threads.
public enum TokenRequestWatch {
    /// Guarded by the mutex: what to run before the first token request; cleared once run.
    private static let beforeFirst = Mutex<(@Sendable () -> Void)?>(nil)

    /// Runs `body` (once, synchronously) just before the first token request of the process is
    /// sent (a renewal, an acquisition, a login's code exchange).
    public static func beforeFirstRequest(_ body: @escaping @Sendable () -> Void) {
        beforeFirst.withLock { $0 = body }
    }

    /// Called just before a token request is marked as sent.
    static func willSend() {
        let body = beforeFirst.withLock { current -> (@Sendable () -> Void)? in
            defer { current = nil }
            return current
        }
        body?()
    }
}
