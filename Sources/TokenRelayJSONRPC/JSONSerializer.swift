/// A value that writes its own compact JSON text: a method's result goes on the wire through this,
/// so a result can be written straight into the answer without first becoming a ``JSONValue``
/// tree (``JSONValue`` itself is one).
public protocol JSONWritable: Sendable {
    /// Appends exactly one compact JSON value to `output`.
    func write(into output: inout [UInt8])
}

/// The compact JSON text of one value, as ``JSONParser/compact(_:)`` makes it: valid by
/// construction (only the parser makes one), byte for byte what parsing the input and serialising
/// the result would give, so it can be spliced into an answer as it is.
public struct JSONText: JSONWritable, Hashable {
    /// The UTF-8 text: one value, no white space outside strings.
    public let bytes: [UInt8]

    init(validated bytes: [UInt8]) { self.bytes = bytes }

    /// The value the text holds.
    public var value: JSONValue {
        // Cannot fail: the bytes are valid JSON by construction.
        (try? JSONParser.parse(bytes)) ?? .null
    }

    public func write(into output: inout [UInt8]) { output.append(contentsOf: bytes) }
}

extension JSONWritable {
    /// The compact JSON text this writes, as UTF-8 bytes.
    public func serialized() -> [UInt8] {
        // Room for a typical answer (status, a dozen headers, a small body) without regrowing.
        var output: [UInt8] = []
        output.reserveCapacity(512)
        write(into: &output)
        return output
    }
}

/// Non-ASCII text is written as UTF-8; control characters, `"` and `\` are escaped; numbers are
/// written as their literal.
extension JSONValue: JSONWritable {}

extension JSONValue {

    /// The compact JSON text of this value.
    public var jsonText: String { String(decoding: serialized(), as: UTF8.self) }

    /// Appends the compact JSON text of this value to `output`.
    public func write(into output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let number): output.append(contentsOf: number.literal.utf8)
        case .string(let text): JSONValue.writeString(text, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                element.write(into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            for (position, member) in object.members.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `text` as a JSON string literal.
    public static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // A native string's bytes are read in place; only another kind is made contiguous first.
        if text.utf8.withContiguousStorageIfAvailable({ appendEscaped($0, into: &output) }) == nil {
            var text = text
            text.withUTF8 { appendEscaped($0, into: &output) }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Appends UTF-8 `bytes` with what JSON requires escaped (`"`, `\\`, control characters),
    /// copying the runs between escapes whole.
    private static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        var runStart = 0
        for index in 0..<bytes.count {
            let byte = bytes[index]
            guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
            runStart = index + 1
            switch byte {
            case 0x22: output.append(contentsOf: [0x5C, 0x22])
            case 0x5C: output.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: output.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                output.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
    }
}
