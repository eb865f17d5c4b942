import Foundation
import HTTP
import JSONRPC

/// The validated params of `request` (and the request-like part of `subscribe`).
struct RequestParams: Sendable {
    /// Where the request goes: a path template against the environment's base URL, or an
    /// absolute URL used as is.
    enum Target: Sendable {
        case path(template: String, variables: [String: JSONValue])
        case url(String)
    }

    /// A request body and the content type it implies when the caller gave none.
    struct Body: Sendable {
        var bytes: [UInt8]
        var defaultContentType: String?
    }

    var environment: String?
    var profile: String?
    var method: String
    var target: Target
    var query: [(name: String, value: String)]
    var headers: HTTPHeaders
    var body: Body?
    var timeout: Duration?
    var auth: Bool
    /// `subscribe` only.
    var lastEventID: String?

    static let requestMembers: Set<String> = [
        "environment", "profile", "method", "path", "url", "pathParams", "query", "headers", "json", "text", "base64",
        "timeoutMs", "auth",
    ]
    static let subscribeMembers: Set<String> = [
        "environment", "profile", "path", "url", "pathParams", "query", "headers", "timeoutMs", "auth", "lastEventId",
    ]

    /// Decodes `request` params; every problem is reported at once as -32602 diagnostics.
    static func decode(_ params: JSONValue?) throws(RPCError) -> RequestParams {
        var reader = try ParamReader(params, allowed: requestMembers)
        let result = decodeCommon(&reader, allowBody: true)
        try reader.finish()
        guard let result else { throw RPCError.invalidParams(reader.diagnostics) }
        return result
    }

    /// Decodes `subscribe` params (GET only, no body, plus `lastEventId`).
    static func decodeSubscription(_ params: JSONValue?) throws(RPCError) -> RequestParams {
        var reader = try ParamReader(params, allowed: subscribeMembers)
        let lastEventID = reader.string("lastEventId")
        var result = decodeCommon(&reader, allowBody: false)
        try reader.finish()
        result?.lastEventID = lastEventID
        guard let result else { throw RPCError.invalidParams(reader.diagnostics) }
        return result
    }

    private static func decodeCommon(_ reader: inout ParamReader, allowBody: Bool) -> RequestParams? {
        let environment = reader.string("environment")
        let profile = reader.string("profile")
        var method = "GET"
        if allowBody, let given = reader.string("method") {
            if given.isEmpty || !given.utf8.allSatisfy(isTokenCharacter) {
                reader.report(["method"], "must be an HTTP method token such as GET or POST")
            } else {
                method = given
            }
        }

        let path = reader.string("path")
        let url = reader.string("url")
        var target: Target?
        switch (path, url) {
        case (let path?, nil):
            if !path.hasPrefix("/") && !path.hasPrefix("{") {
                reader.report(["path"], "must start with '/' (use url for an absolute URL)")
            }
            target = .path(template: path, variables: decodePathParams(&reader))
        case (nil, let url?):
            if let variables = reader.objectValue("pathParams"), !variables.isEmpty {
                reader.report(["pathParams"], "only allowed with path")
            }
            let lower = url.lowercased()
            if !(lower.hasPrefix("http://") || lower.hasPrefix("https://")) {
                reader.report(["url"], "must be an absolute http or https URL")
            }
            target = .url(url)
        case (nil, nil):
            reader.report([], "one of path or url is required")
        case (.some, .some):
            reader.report(["url"], "give either path or url, not both")
        }

        let query = decodeQuery(&reader)
        let headers = decodeHeaders(&reader)
        let body = allowBody ? decodeBody(&reader) : nil
        let timeout = reader.integer("timeoutMs", in: 1...86_400_000).map { Duration.milliseconds($0) }
        let auth = reader.bool("auth") ?? true
        guard let target, reader.diagnostics.isEmpty else { return nil }
        return RequestParams(
            environment: environment, profile: profile, method: method, target: target, query: query, headers: headers,
            body: body, timeout: timeout, auth: auth, lastEventID: nil)
    }

    private static func decodePathParams(_ reader: inout ParamReader) -> [String: JSONValue] {
        guard let object = reader.objectValue("pathParams") else { return [:] }
        var variables: [String: JSONValue] = [:]
        for (name, value) in object {
            switch value {
            case .string, .number, .bool, .null: variables[name] = value
            case .array(let items):
                for (index, item) in items.enumerated() where !isScalar(item) {
                    reader.report(["pathParams", name, String(index)], "must be a string, number or boolean")
                }
                variables[name] = value
            case .object(let members):
                for member in members where !isScalar(member.value) {
                    reader.report(["pathParams", name, member.key], "must be a string, number or boolean")
                }
                variables[name] = value
            }
        }
        return variables
    }

    private static func decodeQuery(_ reader: inout ParamReader) -> [(name: String, value: String)] {
        guard let object = reader.objectValue("query") else { return [] }
        var pairs: [(name: String, value: String)] = []
        for (name, value) in object {
            if case .array(let items) = value {
                for (index, item) in items.enumerated() {
                    if let text = scalarText(item) {
                        pairs.append((name, text))
                    } else {
                        reader.report(["query", name, String(index)], "must be a string, number or boolean")
                    }
                }
            } else if let text = scalarText(value) {
                pairs.append((name, text))
            } else {
                reader.report(["query", name], "must be a string, number, boolean or an array of them")
            }
        }
        return pairs
    }

    private static func decodeHeaders(_ reader: inout ParamReader) -> HTTPHeaders {
        guard let object = reader.objectValue("headers") else { return HTTPHeaders() }
        var headers = HTTPHeaders()
        for (name, value) in object {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else {
                reader.report(["headers", name], "is not a valid header name")
                continue
            }
            guard case .string(let text) = value else {
                reader.report(["headers", name], "must be a string, not \(value.typeName)")
                continue
            }
            guard !text.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) else {
                reader.report(["headers", name], "must not contain CR, LF or NUL")
                continue
            }
            headers.add(name: name, value: text)
        }
        return headers
    }

    private static func decodeBody(_ reader: inout ParamReader) -> Body? {
        let present = ["json", "text", "base64"].filter { reader.object[$0] != nil }
        if present.count > 1 {
            reader.report([present[1]], "give at most one of json, text or base64")
            return nil
        }
        if let json = reader.object["json"] {
            return Body(bytes: json.serialized(), defaultContentType: "application/json")
        }
        if let text = reader.string("text") {
            return Body(bytes: Array(text.utf8), defaultContentType: "text/plain; charset=utf-8")
        }
        if let encoded = reader.string("base64") {
            guard let data = Data(base64Encoded: encoded, options: .ignoreUnknownCharacters) else {
                reader.report(["base64"], "is not valid base64")
                return nil
            }
            return Body(bytes: Array(data), defaultContentType: "application/octet-stream")
        }
        return nil
    }

    private static func isScalar(_ value: JSONValue) -> Bool {
        switch value {
        case .string, .number, .bool: true
        default: false
        }
    }

    /// Query values: strings as is, numbers and booleans as their JSON text.
    static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): text
        case .number(let number): number.literal
        case .bool(let flag): flag ? "true" : "false"
        default: nil
        }
    }

    /// RFC 9110 `tchar`.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
