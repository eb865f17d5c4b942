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
            object[name] = name == "set-cookie" ? .array(list.map { .string($0) }) : .string(list.joined(separator: ", "))
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
        let base = contentType.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
        return base.trimmingCharacters(in: .whitespaces).lowercased()
    }

    static func isTextual(_ mediaType: String) -> Bool {
        mediaType.hasPrefix("text/") || mediaType.hasSuffix("+xml") || mediaType.hasSuffix("/xml")
            || [
                "application/javascript", "application/ecmascript", "application/x-www-form-urlencoded",
                "application/yaml", "application/x-yaml", "application/graphql", "application/x-ndjson",
            ].contains(mediaType)
    }
}
