import TokenRelayHTTPFields
import TokenRelayJSONRPC

/// The tool parameters a server asks clients to mirror into `Mcp-Param-{Name}` headers (MCP
/// 2026-07-28, Streamable HTTP "Custom Headers from Tool Parameters"): read from each tool's
/// `inputSchema` where `tools/list` answers pass the proxy, and sent with its `tools/call`s. Pure.
struct MCPParameterHeaders: Sendable, Equatable {
    /// One annotated parameter: the chain of `properties` keys to it and its header name part.
    struct Declaration: Sendable, Equatable {
        let path: [String]
        let name: String
    }

    let declarations: [Declaration]

    /// The largest integer a JavaScript number holds exactly (the spec's safe range).
    static let safeInteger: Int64 = (1 << 53) - 1

    /// Reads the `x-mcp-header` annotations of `inputSchema`; throws the reason a client must
    /// exclude the tool: an annotation off a pure `properties` chain (under `items`, `oneOf`,
    /// `$ref`...), a name that is not an RFC 9110 token, a property whose `type` is not
    /// `string`, `integer` or `boolean`, or a name used twice (case-insensitively).
    init(inputSchema: JSONValue?) throws(Invalid) {
        var found: [Declaration] = []
        var names: Set<String> = []
        try Self.walk(inputSchema, path: [], reachable: true) { (path, schema) throws(Invalid) in
            guard let annotation = schema["x-mcp-header"] else { return }
            let property = path?.joined(separator: ".") ?? "?"
            guard let path, !path.isEmpty else {
                throw Invalid(reason: "x-mcp-header where no pure chain of properties reaches it")
            }
            guard case .string(let name) = annotation, HTTPFieldRules.isToken(name) else {
                throw Invalid(reason: "property '\(property)': x-mcp-header is not an RFC 9110 token")
            }
            guard let type = schema["type"]?.stringValue, ["string", "integer", "boolean"].contains(type) else {
                throw Invalid(
                    reason: "property '\(property)': x-mcp-header only on string, integer or boolean properties")
            }
            guard names.insert(name.lowercased()).inserted else {
                throw Invalid(reason: "x-mcp-header '\(name)' is used twice")
            }
            found.append(Declaration(path: path, name: name))
        }
        declarations = found
    }

    /// Why a tool definition is refused.
    struct Invalid: Error, Equatable {
        let reason: String
    }

    /// Visits every schema position of `schema` (JSON Schema 2020-12 applicators) with the chain of
    /// `properties` keys that reaches it, `nil` once the chain passed through anything else.
    private static func walk(
        _ schema: JSONValue?, path: [String]?, reachable: Bool,
        _ visit: ([String]?, JSONObject) throws(Invalid) -> Void
    ) throws(Invalid) {
        guard case .object(let object)? = schema else { return }
        try visit(reachable ? path : nil, object)
        for (key, value) in object {
            switch key {
            case "properties":
                guard case .object(let properties) = value else { continue }
                for (name, child) in properties {
                    try walk(child, path: reachable ? (path ?? []) + [name] : nil, reachable: reachable, visit)
                }
            case "patternProperties", "$defs", "definitions", "dependentSchemas":
                guard case .object(let children) = value else { continue }
                for (_, child) in children { try walk(child, path: nil, reachable: false, visit) }
            case "items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
                "unevaluatedProperties", "not", "if", "then", "else":
                try walk(value, path: nil, reachable: false, visit)
            case "prefixItems", "allOf", "anyOf", "oneOf":
                guard case .array(let children) = value else { continue }
                for child in children { try walk(child, path: nil, reachable: false, visit) }
            default:
                continue
            }
        }
    }

    /// The headers a call with `arguments` carries: each annotated value present (not null) as
    /// `Mcp-Param-{Name}`, strings as they are, integers in decimal, booleans as `true`/`false`,
    /// encoded as ``MCPMessage/headerValue(_:)`` encodes (the Base64 sentinel when unsafe).
    func headers(for arguments: JSONValue?) -> [(name: String, value: String)] {
        declarations.compactMap { declaration in
            var node = arguments
            for key in declaration.path { node = node?.objectValue?[key] }
            let text: String
            switch node {
            case .string(let value)?: text = value
            case .bool(let value)?: text = value ? "true" : "false"
            case .number(let number)?:
                // `magnitude`, not `abs`: abs(Int64.min) traps, and the value is the client's.
                guard let integer = Int64(number.literal), integer.magnitude <= UInt64(Self.safeInteger) else {
                    return nil
                }
                text = String(integer)
            default: return nil
            }
            return ("Mcp-Param-" + declaration.name, MCPMessage.headerValue(text))
        }
    }
}
