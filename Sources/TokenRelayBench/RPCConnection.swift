import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// JSON-RPC over NDJSON with a child process, driven for load: a writer (the calling thread)
/// keeps up to N requests in flight and a reader thread matches answers by id.
///
/// Answers are matched with no JSON parsing: tokenrelay writes `{"jsonrpc":"2.0","id":N,...`
/// (member order is kept), so the id is the number right after that prefix, and
/// `,"error"` right after the id marks an error. A `cat`-like echo answers with the request
/// itself, which has the same prefix, so the same driver measures the pipe ceiling.
final class RPCConnection: @unchecked Sendable {
    // @unchecked Sendable: the mutable state (`carry`, counters, `firstError`) is touched only by
    // the reader thread of the phase in progress; phases run one after another and the caller
    // waits on `readerDone` before it reads the counters or starts the next phase.

    /// The child process.
    let child: ChildProcess
    private var nextID = 1
    private var carry: [UInt8] = []
    private let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 17, alignment: 16)
    private static let idPrefix = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
    private static let eventPrefix = Array(#"{"jsonrpc":"2.0","method":"event""#.utf8)
    private static let errorMarker = Array(#","error""#.utf8)

    /// Notifications seen (lines without an id).
    private(set) var notifications = 0
    /// `event` notifications seen.
    private(set) var events = 0
    /// The first error answer, for diagnostics.
    private(set) var firstError: String?

    /// Wraps a spawned child.
    init(child: ChildProcess) {
        self.child = child
    }

    deinit { chunk.deallocate() }

    /// Sends `total` requests `{"jsonrpc":"2.0","id":N,<body>}` keeping `inflight` outstanding and
    /// waits for every answer. An answer counts as an error when it is a JSON-RPC error or, with
    /// `expect`, when it does not contain those bytes (e.g. `"status":200,`).
    func run(body: String, total: Int, inflight: Int, expect: String? = nil) -> LoadResult {
        let firstID = nextID
        nextID += total
        let sendTimes = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: total)
        let receiveTimes = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: total)
        sendTimes.initialize(repeating: 0)
        receiveTimes.initialize(repeating: 0)
        defer {
            sendTimes.deallocate()
            receiveTimes.deallocate()
        }
        let slots = DispatchSemaphore(value: inflight)
        let readerDone = DispatchSemaphore(value: 0)
        let expectBytes = expect.map { Array($0.utf8) }
        let errorsBox = UnsafeMutablePointer<Int>.allocate(capacity: 1)
        errorsBox.initialize(to: 0)
        defer { errorsBox.deallocate() }
        let shared = PhaseBuffers(receiveTimes: receiveTimes, errors: errorsBox)
        let reader = Thread { [self] in
            shared.errors.pointee = readAnswers(
                firstID: firstID, total: total, expect: expectBytes, receiveTimes: shared.receiveTimes, slots: slots)
            readerDone.signal()
        }
        reader.stackSize = 1 << 20
        reader.start()

        let suffix = Array(",\(body)}\n".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(min(inflight, 512) * (suffix.count + 40))
        var sent = 0
        while sent < total {
            slots.wait()
            var batch = 1
            while sent + batch < total, batch < 512, slots.wait(timeout: .now()) == .success { batch += 1 }
            output.removeAll(keepingCapacity: true)
            for offset in 0..<batch {
                output.append(contentsOf: Self.idPrefix)
                appendDecimal(firstID + sent + offset, to: &output)
                output.append(contentsOf: suffix)
            }
            let now = monotonicNanos()
            for offset in 0..<batch { sendTimes[sent + offset] = now }
            output.withUnsafeBytes { writeAll(child.input, $0) }
            sent += batch
        }
        readerDone.wait()

        var latencies: [UInt64] = []
        latencies.reserveCapacity(total)
        for index in 0..<total { latencies.append(receiveTimes[index] &- sendTimes[index]) }
        let first = sendTimes.min() ?? 0
        let last = receiveTimes.max() ?? 0
        return LoadResult(completed: total, errors: errorsBox.pointee, wallNanos: last &- first, latencies: latencies)
    }

    /// Reads until `total` answers with ids from `firstID` have come; returns the error count.
    private func readAnswers(
        firstID: Int, total: Int, expect: [UInt8]?, receiveTimes: UnsafeMutableBufferPointer<UInt64>,
        slots: DispatchSemaphore
    ) -> Int {
        var answered = 0
        var errors = 0
        while answered < total {
            let count = read(child.output, chunk.baseAddress, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { die("the child closed its stdout after \(answered) of \(total) answers") }
            let now = monotonicNanos()
            forEachLine(count: count) { line in
                guard let (id, rest) = Self.answerID(line) else {
                    notifications += 1
                    if Self.hasPrefix(line, Self.eventPrefix) { events += 1 }
                    return
                }
                let index = id - firstID
                guard index >= 0, index < total else { return }
                var failed = Self.hasPrefix(UnsafeRawBufferPointer(rebasing: line[rest...]), Self.errorMarker)
                if !failed, let expect, !Self.contains(line, expect) { failed = true }
                if failed {
                    errors += 1
                    if firstError == nil { firstError = String(decoding: line, as: UTF8.self) }
                }
                receiveTimes[index] = now
                answered += 1
                slots.signal()
            }
        }
        return errors
    }

    /// Counts `event` notifications arriving within `seconds` (no request is outstanding).
    func countEvents(for seconds: Double) -> (events: Int, notifications: Int) {
        let startEvents = events
        let startNotifications = notifications
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        while true {
            let now = monotonicNanos()
            guard now < deadline else { break }
            var descriptor = pollfd(fd: child.output, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(max(1, (deadline - now) / 1_000_000)))
            guard ready > 0 else { continue }
            let count = read(child.output, chunk.baseAddress, chunk.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            forEachLine(count: count) { line in
                notifications += 1
                if Self.hasPrefix(line, Self.eventPrefix) { events += 1 }
            }
        }
        return (events - startEvents, notifications - startNotifications)
    }

    /// Calls `body` for every complete line in the first `count` bytes of `chunk` (plus the
    /// carried partial line), and carries the rest.
    private func forEachLine(count: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        guard let base = chunk.baseAddress else { return }
        var start = 0
        while start < count, let found = memchr(base + start, 0x0A, count - start) {
            let end = found - base
            if carry.isEmpty {
                body(UnsafeRawBufferPointer(start: base + start, count: end - start))
            } else {
                carry.append(contentsOf: UnsafeRawBufferPointer(start: base + start, count: end - start))
                carry.withUnsafeBytes { body($0) }
                carry.removeAll(keepingCapacity: true)
            }
            start = end + 1
        }
        if start < count { carry.append(contentsOf: UnsafeRawBufferPointer(start: base + start, count: count - start)) }
    }

    /// The numeric id of an answer line and the offset just after it, or `nil` for a notification.
    private static func answerID(_ line: UnsafeRawBufferPointer) -> (Int, Int)? {
        guard hasPrefix(line, idPrefix) else { return nil }
        var index = idPrefix.count
        var value = 0
        var digits = 0
        while index < line.count, line[index] >= 0x30, line[index] <= 0x39 {
            value = value * 10 + Int(line[index] - 0x30)
            index += 1
            digits += 1
        }
        return digits > 0 ? (value, index) : nil
    }

    private static func hasPrefix(_ line: UnsafeRawBufferPointer, _ prefix: [UInt8]) -> Bool {
        guard line.count >= prefix.count else { return false }
        for index in 0..<prefix.count where line[index] != prefix[index] { return false }
        return true
    }

    private static func contains(_ line: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, line.count >= needle.count, let base = line.baseAddress else { return false }
        var start = 0
        while start + needle.count <= line.count,
            let found = memchr(base + start, Int32(first), line.count - needle.count + 1 - start)
        {
            let offset = UnsafeRawPointer(found) - base
            if memcmp(found, needle, needle.count) == 0 { return true }
            start = offset + 1
        }
        return false
    }
}

/// The buffers one phase's reader thread writes and the writer reads after `readerDone`.
private struct PhaseBuffers: @unchecked Sendable {
    // @unchecked Sendable: the reader thread writes them, the caller reads them only after
    // waiting on the semaphore the reader signals when it is done (a happens-before edge).
    let receiveTimes: UnsafeMutableBufferPointer<UInt64>
    let errors: UnsafeMutablePointer<Int>
}

/// Appends the decimal digits of a non-negative `value`.
func appendDecimal(_ value: Int, to output: inout [UInt8]) {
    if value < 10 {
        output.append(UInt8(0x30 + value))
        return
    }
    var digits:
        (
            UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
            UInt8, UInt8, UInt8, UInt8, UInt8
        ) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    var count = 0
    var rest = value
    withUnsafeMutableBytes(of: &digits) { buffer in
        while rest > 0 {
            buffer[count] = UInt8(0x30 + rest % 10)
            rest /= 10
            count += 1
        }
        for index in stride(from: count - 1, through: 0, by: -1) { output.append(buffer[index]) }
    }
}
