import Dispatch
import TokenRelayPlatform

/// The one writer of log lines to a file descriptor (stderr): the process's ``DescriptorWriter``
/// for it, whose bound drops lines instead of waiting, so a parent that reads stderr slowly, or
/// not at all, never blocks a thread that logs (the stdin reader among them). A log line is the
/// one output that may be lost: past `bound` queued bytes a line is dropped and counted, and once
/// the queue has drained, a line saying how many were dropped is written. A start that logs a
/// warning creates no thread for it (the thread that logs writes its line itself when it can).
public final class LogWriter: Sendable {
    /// The default bound: 1 MiB of queued log lines.
    public static let defaultBound = 1 << 20

    private let output: DescriptorWriter

    /// `dropNotice` renders the "N log lines dropped" line in the logger's format.
    init(fileDescriptor: Int32, bound: Int = LogWriter.defaultBound, dropNotice: @escaping @Sendable (Int) -> [UInt8]) {
        output = DescriptorWriter(
            fileDescriptor: fileDescriptor, bound: bound, overflow: .drop(notice: dropNotice),
            threadName: "relay-stderr")
    }

    /// Writes one line inline or queues it; never blocks. Drops it (and counts it) when the queue
    /// is full.
    func enqueue(_ line: [UInt8]) {
        output.write(line)
    }

    /// Waits until every queued line is written, at most `timeout` (stderr may never be read);
    /// whether they were.
    @discardableResult
    func flush(timeout: DispatchTimeInterval) -> Bool {
        output.drain(timeout: timeout)
    }
}
