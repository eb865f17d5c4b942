/// A byte stream that an event loop can read on its own thread, between its other work, whenever
/// polling says a read will not block: the server's stdin once a transfer loop runs, so that a
/// request read from the peer needs no hand-off from a reader thread to the loop that serves it
/// (one thread wake-up less per request).
///
/// One owner at a time reads the input: its own thread until a loop adopts it
/// (``InputPoller/adopt(_:)``), then that loop until the input ends or the loop gives it back
/// (``handBack()``), when its own thread resumes. The hand-over goes through the loop's locked
/// queue, which orders the two owners' accesses.
public protocol PolledInput: AnyObject, Sendable {
    /// The descriptor to poll for reading.
    var fileDescriptor: Int32 { get }

    /// Whether the owner may read now. When it may not (the output is backed up), `resume` is
    /// called once, from any thread, when it may again; until then the loop does not poll.
    func mayRead(resume: @escaping @Sendable () -> Void) -> Bool

    /// Reads once and delivers what was read; called when ``fileDescriptor`` polled readable
    /// (or at its end: libcurl's poll reports `POLLHUP` as `POLLIN`).
    /// Returns `false` at the end of input (reported to its consumer): the loop forgets it.
    func readAvailable() -> Bool

    /// The loop stops: the input goes back to its own thread.
    func handBack()
}

/// An event loop that can take over a ``PolledInput``.
public protocol InputPoller: AnyObject, Sendable {
    /// Takes `input`; `false` when the loop is stopping, and the caller keeps it.
    func adopt(_ input: any PolledInput) -> Bool
}
