/// Builds a response head from the header lines libcurl hands over one at a time.
///
/// Only the LAST response's head is kept: every status line (`HTTP/...`) starts over, so interim
/// `1xx` responses and their fields disappear. Field names are lower-cased on their ASCII letters
/// as they are decoded (names are case-insensitive, and HTTP/2 sends them so: one spelling for
/// every version, and the `request` result's lower-case names cost no second pass); repeated
/// fields are kept in order; obsolete line folding is joined with one space. Pure and
/// allocation-light.
struct ResponseHeadParser: Sendable {
    /// The status code of the latest status line, 0 before one was seen.
    private(set) var status = 0
    /// The fields of the latest response head, in order.
    private(set) var fields: [(name: String, value: String)] = []
    /// Whether a final (non-1xx) head has been completed by its blank line.
    private(set) var isComplete = false

    init() {}

    /// Consumes one header line (its CRLF optional). Returns `true` exactly when this line ends a
    /// final response head, i.e. the response's status and fields are now known.
    mutating func consume(line: UnsafeBufferPointer<UInt8>) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if end == 0 {
            guard status >= 200, !isComplete else { return false }
            isComplete = true
            return true
        }
        if end >= 5, line[0] == 0x48, line[1] == 0x54, line[2] == 0x54, line[3] == 0x50, line[4] == 0x2F {
            // "HTTP/": a new response starts (after a 1xx, or a proxy's reply).
            fields.removeAll(keepingCapacity: true)
            isComplete = false
            status = Self.parseStatus(line, end: end)
            return false
        }
        // Trailers (after a completed head) are not part of the head.
        guard !isComplete else { return false }
        if line[0] == 0x20 || line[0] == 0x09 {
            guard !fields.isEmpty else { return false }
            let continuation = Self.trimmed(line, from: 0, to: end)
            fields[fields.count - 1].value += " " + continuation
            return false
        }
        var colon = 0
        while colon < end, line[colon] != 0x3A { colon += 1 }
        guard colon < end, colon > 0 else { return false }
        let name = String(unsafeUninitializedCapacity: colon) { name in
            for index in 0..<colon {
                let byte = line[index]
                name[index] = byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
            }
            return colon
        }
        let value = Self.trimmed(line, from: colon + 1, to: end)
        // Sized once for a typical head rather than doubling from one (four reallocations for
        // the eight fields of a small response).
        if fields.isEmpty { fields.reserveCapacity(16) }
        fields.append((name, value))
        return false
    }

    /// Parses the three digits after the first space of a status line; 0 if absent.
    private static func parseStatus(_ line: UnsafeBufferPointer<UInt8>, end: Int) -> Int {
        var index = 0
        while index < end, line[index] != 0x20 { index += 1 }
        while index < end, line[index] == 0x20 { index += 1 }
        var code = 0
        var digits = 0
        while index < end, digits < 3, line[index] >= 0x30, line[index] <= 0x39 {
            code = code * 10 + Int(line[index] - 0x30)
            index += 1
            digits += 1
        }
        return digits == 3 ? code : 0
    }

    /// The bytes in `from..<to` without leading and trailing spaces and tabs, decoded as UTF-8.
    private static func trimmed(_ line: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> String {
        var start = from, end = to
        while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
        while end > start, line[end - 1] == 0x20 || line[end - 1] == 0x09 { end -= 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: line[start..<end]), as: UTF8.self)
    }
}
