/// Why a JSON text could not be parsed: what was wrong and at which byte offset.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public let offset: Int

    public var description: String { "\(reason) at byte \(offset)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes. Numbers keep their literal text; nesting is
/// bounded by `maximumDepth` so hostile input cannot exhaust the stack. Invalid UTF-8 inside
/// strings is replaced by U+FFFD, as is a lone surrogate escape.
public struct JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    public static let maximumDepth = 512

    /// Parses one JSON value that makes up the whole of `bytes` (surrounding white space allowed).
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError>
        if let direct = bytes.withContiguousStorageIfAvailable({ buffer in Self.parseBuffer(buffer) }) {
            result = direct
        } else {
            result = Array(bytes).withUnsafeBufferPointer { Self.parseBuffer($0) }
        }
        return try result.get()
    }

    /// Parses the UTF-8 of `text`.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    private static func parseBuffer(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        var parser = Cursor(bytes: buffer)
        do throws(JSONParseError) {
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else {
                throw JSONParseError(reason: "unexpected data after the JSON value", offset: parser.index)
            }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    /// The compact text of the one JSON value that makes up `bytes`: exactly
    /// `parse(bytes).serialized()`, and the same error when `bytes` is not JSON. A text whose
    /// strings have no escapes and no non-ASCII bytes (most API bodies) is checked and copied in
    /// one pass without building a tree; anything else (or anything wrong) goes through ``parse(_:)``,
    /// which decides. So this never accepts what the parser refuses.
    public static func compact(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONText {
        let copied = bytes.withContiguousStorageIfAvailable { buffer -> [UInt8]? in
            var cursor = Cursor(bytes: buffer)
            var output: [UInt8] = []
            output.reserveCapacity(buffer.count)
            cursor.skipWhitespace()
            guard cursor.copyPlainValue(depth: 0, into: &output) else { return nil }
            cursor.skipWhitespace()
            return cursor.index == buffer.count ? output : nil
        }
        if let copied, let copied { return JSONText(validated: copied) }
        return JSONText(validated: try parse(bytes).serialized())
    }

    /// Whether `bytes` is exactly one JSON number literal.
    static func isNumberLiteral(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in
            var cursor = Cursor(bytes: buffer)
            guard (try? cursor.parseNumber()) != nil else { return false }
            return cursor.index == buffer.count
        }
    }

    /// Reads bytes at an index. Must only be used inside the `withUnsafeBufferPointer` call
    /// that produced `bytes`.
    fileprivate struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        func fail(_ reason: String) -> JSONParseError { JSONParseError(reason: reason, offset: index) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
            guard index < bytes.count else { throw fail("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectWord("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
            default: throw fail("unexpected character")
            }
        }

        mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw fail("unexpected end of input") }
            let start = word.utf8Start
            for offset in 0..<count where bytes[index + offset] != start[offset] {
                throw fail("invalid literal")
            }
            index += count
        }

        mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= JSONParser.maximumDepth else { throw fail("nesting deeper than \(JSONParser.maximumDepth)") }
            index += 1
            var members: [(key: String, value: JSONValue)] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(JSONObject(members))
            }
            // Room for a request's envelope (`jsonrpc`, `id`, `method`, `params`) at once, rather
            // than growing from one member.
            members.reserveCapacity(4)
            while true {
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of input in object") }
                guard bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try parseString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                members.append((key, value))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of input in object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(JSONObject(members))
                } else {
                    throw fail("expected ',' or '}'")
                }
            }
        }

        mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= JSONParser.maximumDepth else { throw fail("nesting deeper than \(JSONParser.maximumDepth)") }
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try parseValue(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of input in array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                } else {
                    throw fail("expected ',' or ']'")
                }
            }
        }

        mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
            let start = index
            try scanNumber()
            let literal = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            return JSONNumber(validLiteral: literal)
        }

        /// Moves past one number literal.
        mutating func scanNumber() throws(JSONParseError) {
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw fail("invalid number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if isDigit(bytes[index]) {
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            } else {
                throw fail("invalid number")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else {
                    throw fail("invalid number: digit expected after '.'")
                }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard index < bytes.count, isDigit(bytes[index]) else {
                    throw fail("invalid number: digit expected in exponent")
                }
                while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            }
        }

        /// ``JSONParser/compact(_:)``'s one pass: appends the value at `index` without its white
        /// space while it is valid and *plain* (strings without escapes or non-ASCII bytes, so
        /// that the input's bytes are what the serialiser would write). `false` as soon as it is
        /// not (an error, an escape, a non-ASCII byte, nesting past the limit): the caller then
        /// lets ``parse(_:)`` decide. Uses the parser's own scanners for white space, literals
        /// and numbers.
        mutating func copyPlainValue(depth: Int, into output: inout [UInt8]) -> Bool {
            guard index < bytes.count else { return false }
            let start = index
            switch bytes[index] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard depth < JSONParser.maximumDepth else { return false }
                let isObject = bytes[index] == UInt8(ascii: "{")
                let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                output.append(bytes[index])
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == close {
                    output.append(close)
                    index += 1
                    return true
                }
                while true {
                    skipWhitespace()
                    if isObject {
                        guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), copyPlainString(into: &output)
                        else { return false }
                        skipWhitespace()
                        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                        output.append(UInt8(ascii: ":"))
                        index += 1
                        skipWhitespace()
                    }
                    guard copyPlainValue(depth: depth + 1, into: &output) else { return false }
                    skipWhitespace()
                    guard index < bytes.count else { return false }
                    let byte = bytes[index]
                    index += 1
                    output.append(byte)
                    if byte == close { return true }
                    guard byte == UInt8(ascii: ",") else { return false }
                }
            case UInt8(ascii: "\""):
                return copyPlainString(into: &output)
            case UInt8(ascii: "t"):
                guard (try? expectWord("true")) != nil else { return false }
            case UInt8(ascii: "f"):
                guard (try? expectWord("false")) != nil else { return false }
            case UInt8(ascii: "n"):
                guard (try? expectWord("null")) != nil else { return false }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard (try? scanNumber()) != nil else { return false }
            default:
                return false
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
            return true
        }

        /// Appends the string at `index` (its quotes included) when it is plain: no escape, no
        /// control character, no byte past ASCII.
        mutating func copyPlainString(into output: inout [UInt8]) -> Bool {
            let start = index
            index += 1  // opening quote
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                    return true
                }
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return false }
                index += 1
            }
            return false
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        mutating func parseString() throws(JSONParseError) -> String {
            index += 1  // opening quote
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw fail("control character in string") }
                index += 1
            }
            guard index < bytes.count else { throw fail("unterminated string") }
            var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return String(decoding: scratch, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): scratch.append(0x22)
                    case UInt8(ascii: "\\"): scratch.append(0x5C)
                    case UInt8(ascii: "/"): scratch.append(0x2F)
                    case UInt8(ascii: "b"): scratch.append(0x08)
                    case UInt8(ascii: "f"): scratch.append(0x0C)
                    case UInt8(ascii: "n"): scratch.append(0x0A)
                    case UInt8(ascii: "r"): scratch.append(0x0D)
                    case UInt8(ascii: "t"): scratch.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try parseHex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            // A high surrogate must be followed by an escaped low surrogate.
                            if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            {
                                let save = index
                                index += 2
                                let low = try parseHex4()
                                if (0xDC00...0xDFFF).contains(low) {
                                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                                } else {
                                    index = save
                                    scalar = 0xFFFD
                                }
                            } else {
                                scalar = 0xFFFD
                            }
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            scalar = 0xFFFD
                        }
                        appendUTF8(scalar, to: &scratch)
                    default:
                        index -= 1
                        throw fail("invalid escape")
                    }
                default:
                    if byte < 0x20 { throw fail("control character in string") }
                    scratch.append(byte)
                    index += 1
                }
            }
            throw fail("unterminated string")
        }

        mutating func parseHex4() throws(JSONParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("invalid \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw fail("invalid \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        func appendUTF8(_ scalar: UInt32, to output: inout [UInt8]) {
            let value = Unicode.Scalar(scalar) ?? "\u{FFFD}"
            output.append(contentsOf: UTF8.encode(value).map { Array($0) } ?? [0xEF, 0xBF, 0xBD])
        }
    }
}
