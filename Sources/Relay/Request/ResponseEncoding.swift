import Foundation
import HTTP
import JSONRPC

/// Turns an HTTP response into the `request` result (SPEC §4.3, §7 "Bodies").
enum ResponseEncoding {
    /// `status`, `headers` (lower-case names; repeated fields joined with ", ", `set-cookie` an
    /// array), one of `json`/`text`/`base64` (none for an empty body) and `elapsedMs`.
    static func result(_ response: HTTPResponse, elapsed: Duration) -> JSONValue {
        var result = JSONObject()
        result["status"] = .int(response.status)
        result["headers"] = .object(headerObject(response.headers))
        if !response.body.isEmpty {
            let (key, value) = body(response.body, contentType: response.headers["content-type"])
            result[key] = value
        }
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        result["elapsedMs"] = .number(JSONNumber((milliseconds * 1000).rounded() / 1000))
        return .object(result)
    }

    static func headerObject(_ headers: HTTPHeaders) -> JSONObject {
        var order: [String] = []
        var values: [String: [String]] = [:]
        for field in headers {
            let name = field.name.lowercased()
            if values[name] == nil { order.append(name) }
            values[name, default: []].append(field.value)
        }
        var object = JSONObject()
        for name in order {
            let list = values[name] ?? []
            object[name] =
                name == "set-cookie" ? .array(list.map { .string($0) }) : .string(list.joined(separator: ", "))
        }
        return object
    }

    /// The body member for `bytes` given the response's content type.
    static func body(_ bytes: [UInt8], contentType: String?) -> (String, JSONValue) {
        let mediaType = contentType.map(Self.mediaType) ?? ""
        if mediaType == "application/json" || mediaType.hasSuffix("+json") {
            if let value = try? JSONParser.parse(bytes) { return ("json", value) }
        }
        if isTextual(mediaType) || mediaType == "application/json" || mediaType.hasSuffix("+json"),
            let text = String(validating: bytes, as: UTF8.self)
        {
            return ("text", .string(text))
        }
        return ("base64", .string(Data(bytes).base64EncodedString()))
    }

    /// The lower-cased media type without parameters.
    static func mediaType(_ contentType: String) -> String {
        // Plain Swift on the UTF-8 view: Foundation's trimmingCharacters bridges through NSString
        // and cost ~3.5 % of tokenrelay's CPU per `request` in scripts/bench's profile. Header
        // whitespace (RFC 9110 OWS) is space and tab.
        let utf8 = contentType.utf8
        var lower = utf8.startIndex
        var upper = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.endIndex
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        while lower < upper, isSpace(utf8[lower]) { lower = utf8.index(after: lower) }
        while upper > lower, isSpace(utf8[utf8.index(before: upper)]) { upper = utf8.index(before: upper) }
        return String(contentType[lower..<upper]).lowercased()
    }

    static func isTextual(_ mediaType: String) -> Bool {
        mediaType.hasPrefix("text/") || mediaType.hasSuffix("+xml") || mediaType.hasSuffix("/xml")
            || [
                "application/javascript", "application/ecmascript", "application/x-www-form-urlencoded",
                "application/yaml", "application/x-yaml", "application/graphql", "application/x-ndjson",
            ].contains(mediaType)
    }
}
