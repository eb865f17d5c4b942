import TokenRelayErrorKinds
import TokenRelayJSONRPC

/// One entry of the OpenRPC document's `methods`: a request or a notification, either way.
struct MethodDescription: Sendable {
    /// Who sends it.
    enum Direction: String, Sendable {
        case clientToServer = "client-to-server"
        case serverToClient = "server-to-client"
    }

    var name: String
    var summary: String
    var description: String? = nil
    var params: [JSONValue] = []
    /// The result's schema; `nil` for a notification.
    var result: JSONValue? = nil
    /// The error kinds it may answer with (requests only).
    var errors: [ErrorKind] = MethodDescription.standardErrors
    /// `planned` for what this build does not implement yet.
    var status = "implemented"
    var direction = Direction.clientToServer
    var isNotification = false

    /// The errors every request may get.
    static let standardErrors: [ErrorKind] = [.invalidParams, .internal, .cancelled, .shuttingDown]
    /// The errors of a request that uses a session's credentials.
    static let requestErrors: [ErrorKind] = credentialErrors + standardErrors
    private static let credentialErrors: [ErrorKind] = [
        .config, .unknownEnvironment, .unknownProfile, .auth, .interactionRequired, .transport, .timeout, .limit,
        .loggedOut, .store,
    ]

    /// A notification (never answered, so no result and no errors).
    static func notification(
        _ name: String, _ summary: String, params: [JSONValue] = [], direction: Direction = .clientToServer,
        status: String = "implemented"
    ) -> MethodDescription {
        MethodDescription(
            name: name, summary: summary, params: params, errors: [], status: status, direction: direction,
            isNotification: true)
    }

    /// The OpenRPC method object.
    var jsonValue: JSONValue {
        var object: JSONObject = [
            "name": .string(name), "summary": .string(summary), "paramStructure": "by-name", "params": .array(params),
        ]
        if let description { object["description"] = .string(description) }
        if let result { object["result"] = ["name": "result", "schema": result] }
        if !errors.isEmpty && !isNotification {
            object["errors"] = .array(errors.map { ["$ref": .string("#/components/errors/\($0.rawValue)")] })
        }
        object["x-status"] = .string(status)
        object["x-direction"] = .string(direction.rawValue)
        if isNotification { object["x-notification"] = true }
        return .object(object)
    }
}

/// Building blocks of the descriptions: schemas and the params several methods share.
enum Schema {
    static let string: JSONValue = ["type": "string"]
    static let boolean: JSONValue = ["type": "boolean"]
    static let integer: JSONValue = ["type": "integer"]
    static let dateTime: JSONValue = ["type": "string", "format": "date-time"]
    static let any: JSONValue = .object([:])

    /// `{"type": "object", "properties": ...}` with `required` when given.
    static func object(_ properties: JSONObject, required: [String] = [], additional: Bool? = nil) -> JSONValue {
        var object: JSONObject = ["type": "object"]
        if !required.isEmpty { object["required"] = .array(required.map { .string($0) }) }
        if let additional { object["additionalProperties"] = .bool(additional) }
        object["properties"] = .object(properties)
        return .object(object)
    }

    /// `{"enum": [...]}`.
    static func oneOf(_ values: [String]) -> JSONValue { ["enum": .array(values.map { .string($0) })] }

    /// A string with a description.
    static func string(_ description: String) -> JSONValue { ["type": "string", "description": .string(description)] }

    /// The `{kind, message}` of an error inside a result or a notification.
    static let error = object(["kind": string, "message": string], required: ["kind", "message"])
}

/// One param of a method.
func param(_ name: String, _ description: String? = nil, required: Bool = false, _ schema: JSONValue) -> JSONValue {
    var object: JSONObject = ["name": .string(name)]
    if let description { object["description"] = .string(description) }
    if required { object["required"] = true }
    object["schema"] = schema
    return .object(object)
}

/// One param of a method, without a description.
func param(_ name: String, required: Bool = false, _ schema: JSONValue) -> JSONValue {
    param(name, nil, required: required, schema)
}

/// The params several methods share.
enum SharedParams {
    /// `environment`, `profile`.
    static let session: [JSONValue] = [
        param(
            "environment", "Environment name; default from --env or the config's default_environment.", Schema.string),
        param("profile", "Profile name; default from the environment's default_profile.", Schema.string),
    ]

    /// Where a request or subscription goes, and its headers.
    static let target: [JSONValue] = [
        param("method", "HTTP method (default GET).", Schema.string),
        param(
            "path",
            "Path resolved against the environment's base_url; an RFC 6570 (levels 1-3) template expanded with pathParams. Exactly one of path or url. No control characters (bytes below 0x20, 0x7F).",
            Schema.string),
        param(
            "url",
            "Absolute http(s) URL, used as is (as libcurl normalises it). Credentials and environment headers are attached only when its origin, as libcurl's URL parser reads it, is the environment's or an allowed origin. No user information, no control characters.",
            ["type": "string", "format": "uri"]),
        param(
            "pathParams",
            "Variables for the path template: strings, numbers, booleans, lists or objects; strings without control characters.",
            ["type": "object"]),
        param(
            "query",
            "Query parameters; an array value repeats the key; numbers and booleans are sent as their JSON text. Names and values without control characters.",
            queryValues),
        param(
            "headers",
            "Request headers; they win over the environment's headers. Names are tokens; values hold no control character but tab. Content-Length, Transfer-Encoding, Host, Connection, Keep-Alive, Upgrade, TE, Trailer, Proxy-* and pseudo-headers are refused (the transport frames every request).",
            ["type": "object", "additionalProperties": Schema.string]),
    ]

    private static let queryScalar: [JSONValue] = [Schema.string, ["type": "number"], Schema.boolean]
    private static let queryValues: JSONValue = [
        "type": "object",
        "additionalProperties": [
            "oneOf": .array(queryScalar + [["type": "array", "items": ["oneOf": .array(queryScalar)]]])
        ],
    ]

    /// At most one body.
    static let body: [JSONValue] = [
        param("json", "JSON body (sent with Content-Type: application/json unless given).", Schema.any),
        param("text", "UTF-8 text body.", Schema.string),
        param("base64", "Binary body, base64-encoded.", ["type": "string", "contentEncoding": "base64"]),
    ]

    /// `timeoutMs`, `auth`.
    static let tail: [JSONValue] = [
        param(
            "timeoutMs", "Bounds the whole request, token acquisition included; default the environment's timeout.",
            ["type": "integer", "minimum": 1]),
        param("auth", "false sends the request without credentials (default true).", Schema.boolean),
    ]
}
