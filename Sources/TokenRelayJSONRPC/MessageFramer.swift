/// The two framings tokenrelay speaks on stdio.
public enum Framing: String, Sendable, CaseIterable {
    /// One JSON value per `\n`-terminated line (MCP, shell pipelines).
    case ndjson
    /// `Content-Length: N\r\n\r\n` + N bytes (LSP base protocol).
    case lsp

    /// Wraps one serialized message for the wire: NDJSON appends its newline in place (no copy
    /// when the body has room for it, which a serialized body usually has).
    public func frame(_ body: consuming [UInt8]) -> [UInt8] {
        switch self {
        case .ndjson:
            var out = body
            out.append(0x0A)
            return out
        case .lsp:
            let header = "Content-Length: \(body.count)\r\n\r\n".utf8
            var out: [UInt8] = []
            out.reserveCapacity(header.count + body.count)
            out.append(contentsOf: header)
            out.append(contentsOf: body)
            return out
        }
    }
}

/// Limits on what the framer accepts.
public struct FramingLimits: Sendable {
    /// Largest message body (bytes). Default 64 MiB.
    public var maximumMessageBytes: Int
    /// Largest LSP header block (bytes). Default 16 KiB.
    public var maximumHeaderBytes: Int

    public init(maximumMessageBytes: Int = 64 << 20, maximumHeaderBytes: Int = 16 << 10) {
        self.maximumMessageBytes = maximumMessageBytes
        self.maximumHeaderBytes = maximumHeaderBytes
    }
}

/// What the framer produced from the bytes seen so far.
public enum FramerOutput: Sendable, Equatable {
    /// One complete message body.
    case message([UInt8])
    /// A bad frame; answer it with an error (`id: null`) and go on.
    case error(FramingError)
}

/// A bad frame, mapped to -32700 (`malformedHeader`) or -32600 (the others) by the server.
public enum FramingError: Error, Sendable, Equatable, CustomStringConvertible {
    case messageTooLarge(limit: Int)
    case headerTooLarge(limit: Int)
    case missingContentLength
    case invalidContentLength(String)

    public var description: String {
        switch self {
        case .messageTooLarge(let limit): "message larger than the limit of \(limit) bytes"
        case .headerTooLarge(let limit): "header larger than the limit of \(limit) bytes"
        case .missingContentLength: "header without Content-Length"
        case .invalidContentLength(let value): "invalid Content-Length: \(value.prefix(40))"
        }
    }
}

/// Splits a byte stream into messages: a pure, chunk-agnostic state machine. The framing is
/// detected from the first non-blank byte unless forced: `C`/`c` (as in `Content-Length:`) →
/// LSP headers; anything else (`{`, `[`, or garbage that then gets a parse error) → NDJSON. NDJSON lines may end in CRLF; LSP header lines may end in LF alone; header
/// names are case-insensitive and unknown headers are ignored.
public struct MessageFramer: Sendable {
    private enum State: Sendable {
        case detecting
        case line(discarding: Bool)
        case header
        /// After an oversized header line: bytes are dropped up to the next line end.
        case skippingHeaderLine
        case content(remaining: Int)
        case skipping(remaining: Int)
    }

    public private(set) var framing: Framing?
    public let limits: FramingLimits
    private var state: State
    private var buffer: [UInt8] = []
    /// Index in `buffer` where unconsumed bytes start (compacted lazily).
    private var start = 0
    /// Index from which to resume scanning for a delimiter.
    private var scanned = 0
    private var contentLength: Int?
    private var headerError: FramingError?

    /// `framing`: `nil` to auto-detect.
    public init(framing: Framing? = nil, limits: FramingLimits = FramingLimits()) {
        self.framing = framing
        self.limits = limits
        switch framing {
        case nil: state = .detecting
        case .ndjson: state = .line(discarding: false)
        case .lsp: state = .header
        }
    }

    /// Feeds bytes and returns every output they complete.
    public mutating func push(_ bytes: some Collection<UInt8>) -> [FramerOutput] {
        buffer.append(contentsOf: bytes)
        var outputs: [FramerOutput] = []
        while let output = step() {
            outputs.append(output)
        }
        compact()
        return outputs
    }

    /// Called at end of input: a final NDJSON line without `\n` still counts.
    public mutating func finish() -> [FramerOutput] {
        var outputs: [FramerOutput] = []
        if case .line(let discarding) = state, !discarding, start < buffer.count {
            let line = trimmedLine(buffer[start..<buffer.count])
            if !line.isEmpty { outputs.append(.message(Array(line))) }
        }
        buffer.removeAll()
        start = 0
        scanned = 0
        return outputs
    }

    private mutating func compact() {
        if start > 0 && (start == buffer.count || start > 1 << 16) {
            buffer.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
    }

    private var available: Int { buffer.count - start }

    private mutating func step() -> FramerOutput? {
        switch state {
        case .detecting:
            while start < buffer.count, isBlank(buffer[start]) { start += 1 }
            guard start < buffer.count else { return nil }
            let first = buffer[start]
            if first | 0x20 == UInt8(ascii: "c") {
                framing = .lsp
                state = .header
            } else {
                framing = .ndjson
                state = .line(discarding: false)
            }
            scanned = start
            return step()

        case .line(let discarding):
            guard let newline = findByte(0x0A) else {
                if !discarding && available > limits.maximumMessageBytes {
                    state = .line(discarding: true)
                    start = buffer.count
                    scanned = start
                    return .error(.messageTooLarge(limit: limits.maximumMessageBytes))
                }
                if discarding {
                    start = buffer.count
                    scanned = start
                }
                return nil
            }
            let lineRange = start..<newline
            start = newline + 1
            scanned = start
            if discarding {
                state = .line(discarding: false)
                return step()
            }
            if lineRange.count > limits.maximumMessageBytes {
                return .error(.messageTooLarge(limit: limits.maximumMessageBytes))
            }
            let line = trimmedLine(buffer[lineRange])
            if line.isEmpty { return step() }
            return .message(Array(line))

        case .header:
            guard let newline = findByte(0x0A) else {
                if available > limits.maximumHeaderBytes {
                    return headerOverflow(lineEnd: nil)
                }
                return nil
            }
            if newline - start > limits.maximumHeaderBytes {
                return headerOverflow(lineEnd: newline)
            }
            var lineEnd = newline
            if lineEnd > start, buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            let line = buffer[start..<lineEnd]
            start = newline + 1
            scanned = start
            if line.isEmpty {
                // End of the header block.
                defer {
                    contentLength = nil
                    headerError = nil
                }
                if let headerError {
                    return .error(headerError)
                }
                guard let length = contentLength else {
                    return .error(.missingContentLength)
                }
                if length > limits.maximumMessageBytes {
                    state = .skipping(remaining: length)
                    return .error(.messageTooLarge(limit: limits.maximumMessageBytes))
                }
                state = .content(remaining: length)
                return step()
            }
            parseHeaderLine(line)
            return step()

        case .skippingHeaderLine:
            guard let newline = findByte(0x0A) else {
                start = buffer.count
                scanned = start
                return nil
            }
            start = newline + 1
            scanned = start
            state = .header
            return step()

        case .content(let remaining):
            guard available >= remaining else { return nil }
            let body = Array(buffer[start..<(start + remaining)])
            start += remaining
            scanned = start
            state = .header
            return .message(body)

        case .skipping(let remaining):
            let dropped = min(remaining, available)
            start += dropped
            scanned = start
            if dropped == remaining {
                state = .header
                return step()
            }
            state = .skipping(remaining: remaining - dropped)
            return nil
        }
    }

    /// Reports an oversized header line and drops it (up to `lineEnd`, or up to the next line
    /// end still to come), so the same bytes give the same outputs however they are chunked.
    private mutating func headerOverflow(lineEnd: Int?) -> FramerOutput {
        if let lineEnd {
            start = lineEnd + 1
        } else {
            start = buffer.count
            state = .skippingHeaderLine
        }
        scanned = start
        contentLength = nil
        headerError = nil
        return .error(.headerTooLarge(limit: limits.maximumHeaderBytes))
    }

    private mutating func parseHeaderLine(_ line: ArraySlice<UInt8>) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            // Junk before a header (some programs log to stdout): ignored.
            return
        }
        let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
        guard name.lowercased() == "content-length" else { return }
        let rawValue = String(decoding: line[(colon + 1)...], as: UTF8.self)
        let value = rawValue.trimmingBlanks()
        if let length = Int(value), length >= 0 {
            contentLength = length
        } else {
            headerError = .invalidContentLength(value)
        }
    }

    private mutating func findByte(_ byte: UInt8) -> Int? {
        var index = max(scanned, start)
        let count = buffer.count
        while index < count {
            if buffer[index] == byte { return index }
            index += 1
        }
        scanned = count
        return nil
    }

    private func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private func trimmedLine(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var lower = line.startIndex
        var upper = line.endIndex
        while lower < upper, isBlank(line[lower]) { lower += 1 }
        while upper > lower, isBlank(line[upper - 1]) { upper -= 1 }
        return line[lower..<upper]
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    func trimmingBlanks() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
