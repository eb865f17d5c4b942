/// A pure, chunk-agnostic parser of `text/event-stream` bodies: the WHATWG HTML standard's "parsing an event stream"
/// and "interpreting an event stream" (§9.2.5–9.2.6). It does no I/O: feed it the body's bytes as they arrive, in
/// chunks of any size split anywhere, and it returns the events each chunk completed. The same bytes give the same
/// events however they are split.
///
/// What it implements:
/// - UTF-8 decoding with one leading byte order mark skipped (even when split across chunks); invalid sequences
///   become U+FFFD. A second BOM is data.
/// - Lines ended by CRLF, LF or a lone CR; a CR at the end of one chunk and an LF at the start of the next are one
///   line ending.
/// - Comments (lines starting with `:`); fields `event`, `data`, `id`, `retry`; unknown fields ignored; a line without
///   a colon is a field name with an empty value; one space after the colon is stripped.
/// - `data` lines joined with `\n`; `id` ignored when it contains NUL, an empty `id` resets the last event ID;
///   `retry` taken only when it is ASCII digits (and fits an `Int`), and it updates ``retry`` at once, even in a
///   block that dispatches no event.
/// - A blank line dispatches: the last event ID is committed; an empty data buffer dispatches nothing; the type
///   defaults to `message`. At end of stream an unfinished event is discarded (``finish()``).
///
/// Memory is bounded: a line longer than ``maxLineLength`` bytes or event data larger than ``maxEventSize`` bytes
/// throws ``ServerSentEventError``. Only a partial line is kept between chunks.
///
/// A value type: each subscription owns one and must use it from one place at a time.
public struct ServerSentEventParser: Sendable {
    /// Default bound on one line, without its line ending: 1 MiB.
    public static let defaultMaxLineLength = 1 << 20
    /// Default bound on one event's data: 8 MiB.
    public static let defaultMaxEventSize = 8 << 20

    /// The longest line accepted, in bytes, without its line ending.
    public let maxLineLength: Int
    /// The largest event data accepted, in bytes (its `data` lines joined with `\n`).
    public let maxEventSize: Int

    /// The last event ID string (WHATWG): committed by each blank line. Empty means none.
    private var committedLastEventID: String
    /// The last event ID buffer: set by `id` fields, committed on a blank line.
    private var lastEventIDBuffer: String
    /// The latest valid `retry` value of the stream, in milliseconds; `nil` until one arrives.
    public private(set) var retry: Int?

    /// The event type buffer; empty means `message`.
    private var eventType = ""
    /// The data buffer: every `data` value of the block followed by `\n`.
    private var data: [UInt8] = []
    /// A valid `retry` value seen in the current block, reported with its event.
    private var blockRetry: Int?
    /// The bytes of a line not yet ended at the end of the previous chunk. Empty when the last chunk ended a line.
    private var partialLine: [UInt8] = []
    /// How many bytes of a leading BOM have been matched; `nil` once the start of the stream has been passed.
    private var bomBytesMatched: Int? = 0
    /// The previous chunk ended with a CR: an LF at the start of the next chunk belongs to that line ending.
    private var pendingCR = false
    /// The error that stopped the parser; every later ``feed(_:into:)`` rethrows it until ``finish()``.
    private var failure: ServerSentEventError?

    /// Creates a parser for one stream.
    /// - Parameters:
    ///   - lastEventID: the last event ID already in effect (for example the one sent as `Last-Event-ID`); events
    ///     carry it until the stream sends an `id` field. `nil` or empty: none.
    ///   - maxLineLength: the longest line accepted, in bytes (at least 1).
    ///   - maxEventSize: the largest event data accepted, in bytes (at least 1).
    public init(
        lastEventID: String? = nil, maxLineLength: Int = defaultMaxLineLength, maxEventSize: Int = defaultMaxEventSize
    ) {
        self.committedLastEventID = lastEventID ?? ""
        self.lastEventIDBuffer = lastEventID ?? ""
        self.maxLineLength = max(1, maxLineLength)
        self.maxEventSize = max(1, maxEventSize)
    }

    /// The last event ID in effect: the one to send as `Last-Event-ID` when reconnecting. `nil` when none was set or
    /// the latest committed `id` field was empty. Only a blank line commits an `id` field.
    public var lastEventID: String? { committedLastEventID.isEmpty ? nil : committedLastEventID }

    /// Parses the next chunk of the stream and returns the events it completed, in order.
    /// - Throws: ``ServerSentEventError`` when a bound is exceeded; the events completed before the fault are lost
    ///   with this form (use ``feed(_:into:)`` to keep them). The parser then stays failed until ``finish()``.
    public mutating func feed(_ chunk: some Collection<UInt8>) throws(ServerSentEventError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        try feed(chunk, into: &events)
        return events
    }

    /// Parses the next chunk of the stream and appends the events it completed to `events`, in order. Events
    /// completed before a fault are appended before the error is thrown.
    /// - Throws: ``ServerSentEventError`` when a bound is exceeded. The parser then stays failed: later calls rethrow
    ///   the same error until ``finish()``.
    public mutating func feed(
        _ chunk: some Collection<UInt8>, into events: inout [ServerSentEvent]
    ) throws(ServerSentEventError) {
        if let failure { throw failure }
        let contiguous: Void? = chunk.withContiguousStorageIfAvailable { bytes in
            consumeRecordingFailure(bytes, into: &events)
        }
        if contiguous == nil {
            Array(chunk).withUnsafeBufferPointer { bytes in consumeRecordingFailure(bytes, into: &events) }
        }
        if let failure { throw failure }
    }

    /// Ends the stream (EOF or a dropped connection): an unfinished event is discarded, as WHATWG requires, and the
    /// parser is ready for the next connection's stream (a fresh leading BOM is skipped again, a failure is cleared).
    /// ``lastEventID`` and ``retry`` are kept; an `id` field of the unfinished block is not committed.
    /// - Returns: whether anything was discarded: an unended line or the data of an event not yet dispatched.
    @discardableResult
    public mutating func finish() -> Bool {
        let discarded = !partialLine.isEmpty || !data.isEmpty
        Self.clear(&partialLine)
        Self.clear(&data)
        eventType = ""
        blockRetry = nil
        lastEventIDBuffer = committedLastEventID
        bomBytesMatched = 0
        pendingCR = false
        failure = nil
        return discarded
    }
}

extension ServerSentEventParser {
    private static let lineFeed: UInt8 = 0x0A
    private static let carriageReturn: UInt8 = 0x0D
    private static let colon: UInt8 = 0x3A
    private static let space: UInt8 = 0x20
    private static let byteOrderMark: (UInt8, UInt8, UInt8) = (0xEF, 0xBB, 0xBF)
    /// Buffers that grew past this are released rather than kept for reuse, so one huge event does not pin memory.
    private static let retainedCapacity = 64 * 1024

    private mutating func consumeRecordingFailure(
        _ bytes: UnsafeBufferPointer<UInt8>, into events: inout [ServerSentEvent]
    ) {
        do {
            try consume(bytes, into: &events)
        } catch {
            failure = error
        }
    }

    /// Splits `bytes` into lines, joining the first with the previous chunk's partial line and keeping the last
    /// unended one for the next chunk.
    private mutating func consume(
        _ bytes: UnsafeBufferPointer<UInt8>, into events: inout [ServerSentEvent]
    ) throws(ServerSentEventError) {
        let end = bytes.count
        var start = skipByteOrderMark(bytes)
        if pendingCR, start < end {
            pendingCR = false
            if bytes[start] == Self.lineFeed { start += 1 }
        }
        while start < end {
            var lineEnd = Self.firstLineBreak(in: bytes, from: start)
            let length = partialLine.count + (lineEnd - start)
            if length > maxLineLength { throw .lineTooLong(limit: maxLineLength) }
            let piece = UnsafeBufferPointer(rebasing: bytes[start..<lineEnd])
            if lineEnd == end {
                partialLine.append(contentsOf: piece)
                return
            }
            if partialLine.isEmpty {
                try processLine(piece, into: &events)
            } else {
                partialLine.append(contentsOf: piece)
                var line: [UInt8] = []
                swap(&line, &partialLine)
                try line.withUnsafeBufferPointer { line throws(ServerSentEventError) in
                    try processLine(line, into: &events)
                }
                Self.clear(&line)
                swap(&line, &partialLine)
            }
            if bytes[lineEnd] == Self.carriageReturn {
                if lineEnd + 1 == end {
                    pendingCR = true
                } else if bytes[lineEnd + 1] == Self.lineFeed {
                    lineEnd += 1
                }
            }
            start = lineEnd + 1
        }
    }

    /// The index of the first CR or LF in `bytes` at or after `start`, or `bytes.count` when there is none. Skips
    /// eight bytes at a time while a word holds neither (the classic "has a zero byte" test on the word XOR the
    /// pattern), then finds the exact byte one at a time.
    private static func firstLineBreak(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start
        let end = bytes.count
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while end - index >= 8 {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let lf = word ^ (ones &* UInt64(lineFeed))
                let cr = word ^ (ones &* UInt64(carriageReturn))
                if ((lf &- ones) & ~lf | (cr &- ones) & ~cr) & highs != 0 { break }
                index += 8
            }
        }
        while index < end {
            let byte = bytes[index]
            if byte == lineFeed || byte == carriageReturn { return index }
            index += 1
        }
        return end
    }

    /// While the start of the stream has not been passed, matches a leading BOM and returns the index of the first
    /// byte after it. A mismatch turns the matched prefix into the start of the first line.
    private mutating func skipByteOrderMark(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        guard var matched = bomBytesMatched else { return 0 }
        let bom = [Self.byteOrderMark.0, Self.byteOrderMark.1, Self.byteOrderMark.2]
        var index = 0
        while index < bytes.count, matched < bom.count, bytes[index] == bom[matched] {
            matched += 1
            index += 1
        }
        if matched == bom.count {
            bomBytesMatched = nil
        } else if index == bytes.count {
            bomBytesMatched = matched  // the chunk ended inside a possible BOM: decide on the next chunk
        } else {
            partialLine.append(contentsOf: bom[..<matched])  // not a BOM: those bytes are data
            bomBytesMatched = nil
        }
        return index
    }

    /// Interprets one line (without its line ending).
    private mutating func processLine(
        _ line: UnsafeBufferPointer<UInt8>, into events: inout [ServerSentEvent]
    ) throws(ServerSentEventError) {
        guard let first = line.first else {
            dispatch(into: &events)
            return
        }
        if first == Self.colon { return }
        var nameEnd = line.count
        var valueStart = line.count
        if let colonIndex = line.firstIndex(of: Self.colon) {
            nameEnd = colonIndex
            valueStart = colonIndex + 1
            if valueStart < line.count, line[valueStart] == Self.space { valueStart += 1 }
        }
        let name = UnsafeBufferPointer(rebasing: line[..<nameEnd])
        let value = UnsafeBufferPointer(rebasing: line[valueStart...])
        switch Field(name) {
        case .data:
            if data.count + value.count > maxEventSize { throw .eventTooLarge(limit: maxEventSize) }
            data.append(contentsOf: value)
            data.append(Self.lineFeed)
        case .event:
            eventType = String(decoding: value, as: UTF8.self)
        case .id:
            if !value.contains(0) { lastEventIDBuffer = String(decoding: value, as: UTF8.self) }
        case .retry:
            if let milliseconds = Self.parseRetry(value) {
                retry = milliseconds
                blockRetry = milliseconds
            }
        case .unknown:
            break
        }
    }

    /// The field names the parser knows (case-sensitive), recognised from bytes without building a string.
    private enum Field {
        case data, event, id, retry, unknown

        init(_ name: UnsafeBufferPointer<UInt8>) {
            func matches(_ expected: StaticString) -> Bool {
                expected.withUTF8Buffer { expected in
                    guard expected.count == name.count else { return false }
                    for index in 0..<expected.count where expected[index] != name[index] { return false }
                    return true
                }
            }
            switch name.count {
            case 2 where matches("id"): self = .id
            case 4 where matches("data"): self = .data
            case 5 where matches("event"): self = .event
            case 5 where matches("retry"): self = .retry
            default: self = .unknown
            }
        }
    }

    /// A non-empty run of ASCII digits as a base-10 `Int`; `nil` for anything else, including overflow.
    private static func parseRetry(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !value.isEmpty else { return nil }
        var result = 0
        for byte in value {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (shifted, overflowA) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = shifted.addingReportingOverflow(Int(byte - 0x30))
            if overflowA || overflowB { return nil }
            result = sum
        }
        return result
    }

    /// A blank line: commits the last event ID and dispatches the block's event, if it has data.
    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        committedLastEventID = lastEventIDBuffer
        let type = eventType.isEmpty ? "message" : eventType
        let retryOfBlock = blockRetry
        eventType = ""
        blockRetry = nil
        guard !data.isEmpty else { return }
        let text = String(decoding: data[..<(data.count - 1)], as: UTF8.self)  // without the final `\n`
        Self.clear(&data)
        events.append(ServerSentEvent(type: type, data: text, lastEventID: lastEventID, retry: retryOfBlock))
    }

    /// Empties `buffer`, keeping its storage for reuse unless it grew large.
    private static func clear(_ buffer: inout [UInt8]) {
        if buffer.capacity > retainedCapacity {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }
}
