import FoundationEssentials
import TokenRelayHTTP
import TokenRelayHTTPFields
import TokenRelayJSONRPC

/// The validated params of `request` (and the request-like part of `subscribe`).
package struct RequestParams: Sendable {
    /// Where the request goes: a path template against the environment's base URL, or an
    /// absolute URL used as is.
    enum Target: Sendable {
        case path(template: String, variables: [String: JSONValue])
        case url(String)

        /// The params member the target came from (`/path` or `/url`).
        var pointer: String {
            switch self {
            case .path: "/path"
            case .url: "/url"
            }
        }
    }

    /// A request body and the content type it implies when the caller gave none.
    struct Body: Sendable {
        var bytes: [UInt8]
        var defaultContentType: String?
    }

    package var environment: String?
    package var profile: String?
    var method: String
    var target: Target
    var query: [(name: String, value: String)]
    var headers: HTTPHeaders
    var body: Body?
    var timeout: Duration?
    package var auth: Bool
    /// `subscribe` only.
    var lastEventID: String?
    /// `subscribe` only: a clean end of the stream ends the subscription (SPEC §5.5).
    var untilClosed = false
    /// Not a member: the MCP face's calls ask for the body decoded (``HTTPRequest/decodesContent``),
    /// so that what masks secrets sees the bytes the agent can read.
    var decodesContent = false

    static let requestMembers: Set<String> = [
        "environment", "profile", "method", "path", "url", "pathParams", "query", "headers", "json", "text", "base64",
        "timeoutMs", "auth",
    ]
    static let subscribeMembers: Set<String> = [
        "environment", "profile", "path", "url", "pathParams", "query", "headers", "timeoutMs", "auth", "lastEventId",
        "untilClosed",
    ]

    /// Decodes `request` params; every problem is reported at once as -32602 diagnostics.
    package static func decode(_ params: JSONValue?) throws(RPCError) -> RequestParams {
        var reader = try ParamReader(params, allowed: requestMembers)
        let result = decodeCommon(&reader, allowBody: true)
        try reader.finish()
        guard let result else { throw RPCError.invalidParams(reader.diagnostics) }
        return result
    }

    /// Decodes `subscribe` params (GET only, no body, plus `lastEventId`).
    package static func decodeSubscription(_ params: JSONValue?) throws(RPCError) -> RequestParams {
        var reader = try ParamReader(params, allowed: subscribeMembers)
        let lastEventID = reader.string("lastEventId")
        if let lastEventID, ParsedURL.containsControlCharacter(lastEventID) {
            // It becomes the Last-Event-ID header of every connection.
            reader.report(["lastEventId"], controlCharacterReason)
        }
        let untilClosed = reader.bool("untilClosed")
        var result = decodeCommon(&reader, allowBody: false)
        try reader.finish()
        result?.lastEventID = lastEventID
        result?.untilClosed = untilClosed ?? false
        guard let result else { throw RPCError.invalidParams(reader.diagnostics) }
        return result
    }

    private static func decodeCommon(_ reader: inout ParamReader, allowBody: Bool) -> RequestParams? {
        let environment = reader.string("environment")
        let profile = reader.string("profile")
        var method = "GET"
        if allowBody, let given = reader.string("method") {
            if !HTTPFieldRules.isToken(given) {
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
            if ParsedURL.containsControlCharacter(path) {
                reader.report(["path"], controlCharacterReason)
            } else if !path.hasPrefix("/") && !path.hasPrefix("{") {
                reader.report(["path"], "must start with '/' (use url for an absolute URL)")
            }
            target = .path(template: path, variables: decodePathParams(&reader))
        case (nil, let url?):
            if let variables = reader.objectValue("pathParams"), !variables.isEmpty {
                reader.report(["pathParams"], "only allowed with path")
            }
            let lower = url.lowercased()
            if ParsedURL.containsControlCharacter(url) {
                reader.report(["url"], controlCharacterReason)
            } else if !(lower.hasPrefix("http://") || lower.hasPrefix("https://")) {
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
        /// Scalars only; a string must hold no control character (it becomes part of the URL).
        func check(_ value: JSONValue, at path: [String], allowNull: Bool = false, _ reader: inout ParamReader) {
            if allowNull, case .null = value { return }
            guard isScalar(value) else {
                reader.report(path, "must be a string, number or boolean")
                return
            }
            if case .string(let text) = value, ParsedURL.containsControlCharacter(text) {
                reader.report(path, controlCharacterReason)
            }
        }
        for (name, value) in object {
            switch value {
            case .array(let items):
                for (index, item) in items.enumerated() {
                    check(item, at: ["pathParams", name, String(index)], &reader)
                }
            case .object(let members):
                for member in members { check(member.value, at: ["pathParams", name, member.key], &reader) }
            default:
                check(value, at: ["pathParams", name], allowNull: true, &reader)
            }
            variables[name] = value
        }
        return variables
    }

    private static func decodeQuery(_ reader: inout ParamReader) -> [(name: String, value: String)] {
        guard let object = reader.objectValue("query") else { return [] }
        var pairs: [(name: String, value: String)] = []
        for (name, value) in object {
            if ParsedURL.containsControlCharacter(name) {
                reader.report(["query", name], "the name " + controlCharacterReason)
                continue
            }
            if case .array(let items) = value {
                for (index, item) in items.enumerated() {
                    if let text = scalarText(item) {
                        if ParsedURL.containsControlCharacter(text) {
                            reader.report(["query", name, String(index)], controlCharacterReason)
                        }
                        pairs.append((name, text))
                    } else {
                        reader.report(["query", name, String(index)], "must be a string, number or boolean")
                    }
                }
            } else if let text = scalarText(value) {
                if ParsedURL.containsControlCharacter(text) { reader.report(["query", name], controlCharacterReason) }
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
            guard !HTTPFieldRules.isReserved(name) else {
                reader.report(
                    ["headers", name],
                    "frames the message or belongs to the connection; the transport sets it (Content-Length, "
                        + "Transfer-Encoding, Host, Connection, Keep-Alive, Upgrade, TE, Trailer, Proxy-* and "
                        + "pseudo-headers cannot be given)")
                continue
            }
            guard HTTPFieldRules.isToken(name) else {
                reader.report(["headers", name], "is not a valid header name (an RFC 9110 token)")
                continue
            }
            guard case .string(let text) = value else {
                reader.report(["headers", name], "must be a string, not \(value.typeName)")
                continue
            }
            guard HTTPFieldRules.isCleanValue(text) else {
                reader.report(
                    ["headers", name], "must not contain control characters (CR, LF, NUL, ...; tab is allowed)")
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

    /// Why a string that ends up in the URL or a header field was refused.
    static let controlCharacterReason = "must not contain control characters (NUL, CR, LF, tab, ...)"
}
