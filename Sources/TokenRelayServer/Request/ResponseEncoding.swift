import FoundationEssentials
import TokenRelayHTTP
import TokenRelayHTTPFields
import TokenRelayJSONRPC

/// Turns an HTTP response into the `request` result (SPEC §4.3, §7 "Bodies").
enum ResponseEncoding {
    /// `status`, `headers` (lower-case names; repeated fields joined with ", ", `set-cookie` an
    /// array), one of `json`/`text`/`base64` (none for an empty body) and `elapsedMs`.
    static func result(_ response: HTTPResponse, elapsed: Duration) -> RequestMethod.Result {
        var result = RequestMethod.Result(
            status: response.status, headers: headerObject(response.headers), elapsed: elapsed)
        if !response.body.isEmpty {
            result.body = body(response.body, contentType: response.headers["content-type"])
        }
        return result
    }

    /// The fields as one object: names lower-cased on their ASCII bytes (field names are RFC 9110
    /// tokens; anything else is left as sent), repeats joined in arrival order. A response has a
    /// handful of fields, so repeats are found by a linear scan, with an index only past 32
    /// distinct names (a server sending thousands must not make this quadratic). Members are
    /// built as they come; only a repeated name collects its values on the side.
    static func headerObject(_ headers: HTTPHeaders) -> JSONObject {
        var members: [(key: String, value: JSONValue)] = []
        members.reserveCapacity(headers.fields.count)
        var repeats: [Int: [String]] = [:]
        var index: [String: Int] = [:]
        for field in headers {
            let name = asciiLowercased(field.name)
            let found = members.count > 32 ? index[name] : members.firstIndex { $0.key == name }
            if let found {
                // The member still holds the name's first value until the repeats are joined.
                repeats[found, default: [text(members[found].value)]].append(field.value)
                continue
            }
            members.append((name, .string(field.value)))
            if members.count == 33 {
                for (position, known) in members.enumerated() { index[known.key] = position }
            } else if members.count > 33 {
                index[name] = members.count - 1
            }
        }
        for (position, values) in repeats {
            members[position].value = .string(values.joined(separator: ", "))
        }
        // `set-cookie` is always an array: its values may themselves hold ", " (in Expires).
        if let position = members.firstIndex(where: { $0.key == "set-cookie" }) {
            let values = repeats[position] ?? [text(members[position].value)]
            members[position].value = .array(values.map { .string($0) })
        }
        return JSONObject(members)

        /// A member's value as built above (always a string until the end).
        func text(_ value: JSONValue) -> String {
            if case .string(let text) = value { return text }
            return ""
        }
    }

    /// `text` with `A`-`Z` lower-cased (the same string when there is none: no copy).
    static func asciiLowercased(_ text: String) -> String {
        func isUpper(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
        let utf8 = text.utf8
        guard utf8.contains(where: isUpper) else { return text }
        // Written straight into the new string's storage (no intermediate array).
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            var count = 0
            for byte in utf8 {
                buffer[count] = isUpper(byte) ? byte | 0x20 : byte
                count += 1
            }
            return count
        }
    }

    /// The body member for `bytes` given the response's content type.
    static func body(_ bytes: [UInt8], contentType: String?) -> RequestMethod.Result.Body {
        let mediaType = contentType.map(Self.mediaType) ?? ""
        if mediaType == "application/json" || mediaType.hasSuffix("+json") {
            // Compacted, not parsed into a tree: a pretty-printed body's newlines cannot go into
            // an NDJSON frame, and the answer splices the bytes as they are.
            if let text = try? JSONParser.compact(bytes) { return .json(text) }
        }
        if isTextual(mediaType) || mediaType == "application/json" || mediaType.hasSuffix("+json"),
            let text = String(validating: bytes, as: UTF8.self)
        {
            return .text(text)
        }
        return .base64(Data(bytes).base64EncodedString())
    }

    /// The media type without parameters, lower-cased on its ASCII letters (media types are
    /// case-insensitive ASCII tokens; Unicode case mapping could turn a non-ASCII letter into an
    /// ASCII one, e.g. the Kelvin sign into `k`).
    static func mediaType(_ contentType: String) -> String {
        let end = contentType.utf8.firstIndex(of: UInt8(ascii: ";")) ?? contentType.endIndex
        return asciiLowercased(HTTPFieldRules.trimmingWhitespace(contentType[..<end]))
    }

    static func isTextual(_ mediaType: String) -> Bool {
        mediaType.hasPrefix("text/") || mediaType.hasSuffix("+xml") || mediaType.hasSuffix("/xml")
            || [
                "application/javascript", "application/ecmascript", "application/x-www-form-urlencoded",
                "application/yaml", "application/x-yaml", "application/graphql", "application/x-ndjson",
            ].contains(mediaType)
    }
}
