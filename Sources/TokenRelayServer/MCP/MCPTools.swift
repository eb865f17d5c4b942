import TokenRelayAuth
import TokenRelayConfig
import TokenRelayJSONRPC

/// The tools `tokenrelay mcp` lists (in this fixed order) and their schemas, built from what
/// the configuration exposes (SPEC §8).
enum MCPTools {
    static let httpRequest = "http_request"
    static let listEnvironments = "list_environments"

    /// What the server tells the agent's host about itself.
    static let instructions =
        "tokenrelay sends HTTP requests to the user's configured APIs with the user's credentials, under rules "
        + "the user wrote. You never see a credential: every known secret in a response (bodies and headers) is "
        + "replaced by [REDACTED]. Call list_environments to see what you may call; paths are relative to an "
        + "environment's base URL."

    /// The form asked for a confirmation: nothing to fill in, only accept or decline.
    static let consentSchema: JSONValue = ["type": "object", "properties": .object([:])]

    static let schemaDialect = "https://json-schema.org/draft/2020-12/schema"

    /// Both tools' definitions for `tools/list`.
    static func definitions(_ exposure: MCPExposure) -> [JSONValue] {
        [httpRequestDefinition(exposure), listEnvironmentsDefinition]
    }

    private static func enumeration(_ names: [String], _ description: String) -> JSONValue {
        var schema: JSONObject = ["type": "string", "description": .string(description)]
        // An empty enum would make the schema unsatisfiable: say there is nothing instead.
        schema["enum"] = .array(names.map { .string($0) })
        return .object(schema)
    }

    static func httpRequestDefinition(_ exposure: MCPExposure) -> JSONValue {
        let environments = exposure.environments.map(\.name)
        let profiles = Array(Set(exposure.environments.flatMap { $0.profiles.map(\.name) })).sorted()
        let scalar: JSONValue = ["type": ["string", "number", "boolean"]]
        let input: JSONValue = [
            "$schema": .string(schemaDialect),
            "type": "object",
            "properties": [
                "environment": enumeration(
                    environments,
                    "The environment (default: \(exposure.defaultEnvironment ?? "none; name one")). See list_environments."
                ),
                "profile": enumeration(profiles, "The profile (credentials) to send with; default: the environment's."),
                "method": ["type": "string", "description": "HTTP method, e.g. GET or POST.", "default": "GET"],
                "path": [
                    "type": "string", "pattern": "^/",
                    "description":
                        "Path relative to the environment's base URL, starting with '/'; may be an RFC 6570 template such as /repos/{owner}. Absolute URLs are refused.",
                ],
                "pathParams": [
                    "type": "object", "description": "Values for the path template's variables.",
                    "additionalProperties": scalar,
                ],
                "query": [
                    "type": "object", "description": "Query parameters; an array value repeats the key.",
                    "additionalProperties": ["anyOf": [scalar, ["type": "array", "items": scalar]]],
                ],
                "headers": [
                    "type": "object",
                    "description":
                        "Extra request headers. Authorization, Cookie, Proxy-*, the profile's credential header, Accept-Encoding, Range and If-Range are refused (compressed answers are decoded for you).",
                    "additionalProperties": ["type": "string"],
                ],
                "json": ["description": "A JSON body (sent as application/json)."],
                "text": ["type": "string", "description": "A text body."],
            ],
            "required": ["path"],
            "additionalProperties": false,
        ]
        let output: JSONValue = [
            "$schema": .string(schemaDialect),
            "type": "object",
            "properties": [
                "status": ["type": "integer", "description": "The HTTP status (any status is a result)."],
                "headers": [
                    "type": "object", "description": "Response headers, lower-case names; secrets masked.",
                    "additionalProperties": [
                        "anyOf": [["type": "string"], ["type": "array", "items": ["type": "string"]]]
                    ],
                ],
                "json": ["description": "The body, parsed (application/json and +json)."],
                "text": ["type": "string", "description": "The body as text."],
                "base64": ["type": "string", "description": "A binary body, base64-encoded."],
                "truncated": ["type": "boolean", "description": "The body was cut at max_response_bytes."],
            ],
            "required": ["status", "headers", "truncated"],
        ]
        return [
            "name": .string(httpRequest),
            "title": "HTTP request",
            "description":
                "Sends an HTTP request to one of the user's configured APIs with the user's credentials, if the user's rules allow it (some calls ask the user first). Any HTTP status is a result. Every known secret in the response is replaced by [REDACTED]: this is the only change made to response data. Bodies longer than the environment's limit are cut (truncated: true).",
            "inputSchema": input,
            "outputSchema": output,
            "annotations": ["openWorldHint": true, "destructiveHint": true, "readOnlyHint": false],
        ]
    }

    static let listEnvironmentsDefinition: JSONValue = [
        "name": .string(listEnvironments),
        "title": "List environments",
        "description":
            "Lists the environments and profiles you may call through http_request, their base URLs, the rules that decide which calls are allowed, denied or need the user's confirmation, and whether each profile's session is logged in. Never a secret.",
        "inputSchema": ["$schema": .string(schemaDialect), "type": "object", "additionalProperties": false],
        "outputSchema": [
            "$schema": .string(schemaDialect),
            "type": "object",
            "properties": [
                "environments": [
                    "type": "array",
                    "items": [
                        "type": "object",
                        "properties": [
                            "name": ["type": "string"], "baseUrl": ["type": "string"], "default": ["type": "boolean"],
                            "maxResponseBytes": ["type": "integer"],
                            "profiles": [
                                "type": "array",
                                "items": [
                                    "type": "object",
                                    "properties": [
                                        "name": ["type": "string"], "type": ["type": "string"],
                                        "default": ["type": "boolean"], "session": ["type": "string"],
                                        "expiresAt": ["type": "string"],
                                        "rules": ["$ref": "#/$defs/rules"],
                                    ],
                                    "required": ["name", "type", "session", "rules"],
                                ],
                            ],
                            "rules": ["$ref": "#/$defs/rules"],
                        ],
                        "required": ["name", "baseUrl", "default", "profiles"],
                    ],
                ],
                "toolCalls": [
                    "type": "object",
                    "description":
                        "What became of this server's http_request calls so far: sent (any HTTP status), refused (nothing sent), failed, awaiting confirmation.",
                    "properties": [
                        "sent": ["type": "integer"], "refused": ["type": "integer"], "failed": ["type": "integer"],
                        "awaiting": ["type": "integer"],
                    ],
                    "required": ["sent", "refused", "failed", "awaiting"],
                ],
            ],
            "required": ["environments", "toolCalls"],
            "$defs": [
                "rules": [
                    "type": "object",
                    "properties": [
                        "allow": ["type": "array", "items": ["type": "string"]],
                        "deny": ["type": "array", "items": ["type": "string"]],
                        "confirm": ["type": "array", "items": ["type": "string"]],
                    ],
                ]
            ],
        ],
        "annotations": ["readOnlyHint": true, "openWorldHint": false],
    ]

    // MARK: - list_environments

    static func rulesValue(_ rules: MCPSettings) -> JSONValue {
        [
            "allow": .array(rules.allow.map { .string($0.text) }),
            "deny": .array(rules.deny.map { .string($0.text) }),
            "confirm": .array(rules.confirm.map { .string($0.text) }),
        ]
    }

    /// What is exposed, with each session's state (from the token manager and the store).
    static func listEnvironments(runtime: RelayRuntime, server: RelayServer) async throws -> MCPToolOutcome {
        let exposure = runtime.mcpExposure
        let subscriptions = server.subscriptions
        let sessions =
            (try? await TokenMethods(runtime: runtime, subscriptionCount: { subscriptions.count }).status().sessions)
            ?? []
        var lines: [String] = []
        let environments: [JSONValue] = exposure.environments.map { environment in
            var profiles: [JSONValue] = []
            for profile in environment.profiles {
                var object: JSONObject = [
                    "name": .string(profile.name), "type": .string(profile.type),
                    "default": .bool(profile.name == environment.defaultProfile),
                    "rules": rulesValue(profile.rules),
                ]
                let session = sessions.first { $0.environment == environment.name && $0.profile == profile.name }
                let state = sessionState(type: profile.type, session: session)
                object["session"] = .string(state)
                if let expiresAt = session?.expiresAt { object["expiresAt"] = .string(expiresAt.rfc3339) }
                profiles.append(.object(object))
                lines.append(
                    "  profile \(profile.name) (\(profile.type)), session: \(state); allow \(profile.rules.allow.map(\.text)), "
                        + "confirm \(profile.rules.confirm.map(\.text)), deny \(profile.rules.deny.map(\.text))")
            }
            var object: JSONObject = [
                "name": .string(environment.name), "baseUrl": .string(environment.baseURL),
                "default": .bool(environment.name == exposure.defaultEnvironment),
                "maxResponseBytes": .int(environment.maxResponseBytes(for: nil)),
                "profiles": .array(profiles),
            ]
            if let rules = environment.rules { object["rules"] = rulesValue(rules) }
            lines.insert("environment \(environment.name): \(environment.baseURL)", at: lines.count - profiles.count)
            return .object(object)
        }
        let counts = server.mcpFace?.counts ?? MCPFace.ToolCallCounts()
        let text =
            (lines.isEmpty
                ? "Nothing is exposed to agents (no mcp: block in the configuration)." : lines.joined(separator: "\n"))
            + "\nhttp_request calls so far: \(counts.text)"
        return .result(
            isError: false, structured: ["environments": .array(environments), "toolCalls": counts.value], text: text)
    }

    /// A profile's session as an agent needs to know it.
    static func sessionState(type: String, session: SessionStatus?) -> String {
        let oauthTypes: Set<String> = ["client_credentials", "refresh_token", "authorization_code", "device_code"]
        guard oauthTypes.contains(type) else { return "static credentials" }
        guard let session else {
            return type == "authorization_code" || type == "device_code" ? "not logged in" : "no token yet"
        }
        switch session.state {
        case .none:
            return type == "authorization_code" || type == "device_code" ? "not logged in" : "no token yet"
        default:
            return session.state.rawValue
        }
    }
}

/// What a tool call answers: a `CallToolResult` (or, on a stateless client, an input-required
/// result asking for the person's confirmation).
enum MCPToolOutcome: Sendable {
    case result(isError: Bool, structured: JSONObject?, text: String)
    case inputRequired(requests: JSONObject, state: String)

    /// A refusal or failure the agent can act on.
    static func failure(_ text: String) -> MCPToolOutcome { .result(isError: true, structured: nil, text: text) }

    func value(era: MCPProtocol.Era) -> JSONValue {
        switch self {
        case .result(let isError, let structured, let text):
            var result: JSONObject = [
                "content": [["type": "text", "text": .string(text)]],
                "isError": .bool(isError),
            ]
            if let structured { result["structuredContent"] = .object(structured) }
            return MCPProtocol.finish(result, era: era)
        case .inputRequired(let requests, let state):
            return MCPProtocol.finish(
                ["inputRequests": .object(requests), "requestState": .string(state)], era: era,
                resultType: "input_required")
        }
    }
}

extension MCPExposure {
    /// The tool definitions `tools/list` answers.
    var toolDefinitions: [JSONValue] { MCPTools.definitions(self) }
}
