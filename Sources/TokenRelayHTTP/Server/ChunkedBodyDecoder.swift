/// Decodes a `Transfer-Encoding: chunked` request body (RFC 9112 §7.1) from bytes as they arrive,
/// in chunks of any size (pure: no I/O). Chunk extensions and trailer fields are read and dropped;
/// a size line or a trailer section longer than its bound, a size that is not hex, or a chunk not
/// followed by CRLF is refused.
public struct ChunkedBodyDecoder: Sendable {
    /// Why a chunked body is refused (answered 400).
    public struct Malformed: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String { "the chunked request body is malformed" }
        public init() {}
    }

    private enum State: Sendable, Equatable {
        /// Reading a size line (bytes kept in `line`).
        case size
        /// Reading the data of a chunk; this many bytes are left.
        case data(Int)
        /// Expecting the CRLF after a chunk's data (`seenCR` once the CR came).
        case dataEnd(seenCR: Bool)
        /// Reading trailer lines (bytes of the current one in `line`).
        case trailer
        /// The last chunk and the trailers have been read.
        case done
    }

    private var state = State.size
    private var line: [UInt8] = []
    private var trailerBytes = 0
    /// The longest size line (size and extensions) accepted.
    static let maximumLine = 4096
    /// The largest trailer section accepted.
    static let maximumTrailer = 16 << 10

    public init() {}

    /// Whether the body has ended.
    public var isComplete: Bool { state == .done }

    /// Consumes `bytes`; appends the body's data to `output`. Returns how many bytes of `bytes`
    /// were used (less than all only once the body ended: the rest is the next request's).
    public mutating func feed(_ bytes: ArraySlice<UInt8>, into output: inout [UInt8]) throws(Malformed) -> Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch state {
            case .done:
                return index - bytes.startIndex
            case .data(let left):
                let take = min(left, bytes.endIndex - index)
                output.append(contentsOf: bytes[index..<(index + take)])
                index += take
                state = left == take ? .dataEnd(seenCR: false) : .data(left - take)
            case .dataEnd(let seenCR):
                let byte = bytes[index]
                index += 1
                if !seenCR, byte == 0x0D {
                    state = .dataEnd(seenCR: true)
                } else if seenCR, byte == 0x0A {
                    state = .size
                } else {
                    throw Malformed()
                }
            case .size, .trailer:
                let byte = bytes[index]
                index += 1
                if state == .trailer {
                    trailerBytes += 1
                    guard trailerBytes <= Self.maximumTrailer else { throw Malformed() }
                }
                guard byte == 0x0A else {
                    line.append(byte)
                    guard line.count <= Self.maximumLine else { throw Malformed() }
                    continue
                }
                guard line.last == 0x0D else { throw Malformed() }
                line.removeLast()
                if state == .trailer {
                    if line.isEmpty { state = .done }
                    line.removeAll(keepingCapacity: true)
                    continue
                }
                let size = try Self.size(of: line)
                line.removeAll(keepingCapacity: true)
                state = size == 0 ? .trailer : .data(size)
            }
        }
        return index - bytes.startIndex
    }

    /// The hex size before any extension (`;name=value`).
    private static func size(of line: [UInt8]) throws(Malformed) -> Int {
        var size = 0
        var digits = 0
        for byte in line {
            if byte == UInt8(ascii: ";") || byte == 0x20 || byte == 0x09 { break }
            let value: Int
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = Int(byte - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = Int(byte - UInt8(ascii: "A")) + 10
            default: throw Malformed()
            }
            digits += 1
            guard digits <= 15 else { throw Malformed() }
            size = size << 4 | value
        }
        guard digits > 0 else { throw Malformed() }
        return size
    }
}
