import TokenRelayErrorKinds
import TokenRelayJSONRPC

/// The OpenRPC document: built once from the descriptions next to each method
/// (``MethodCatalog/documented``) and the error table. `rpc.discover` returns it, and
/// `tokenrelay __openrpc` (run by `scripts/gen-openrpc`) writes it to `schemas/openrpc.json`; a
/// test fails when the checked-in file is stale.
public enum OpenRPCDocument {
    /// The document, built once.
    public static let value: JSONValue = build()

    /// The document as `schemas/openrpc.json` holds it (two-space indentation, a final newline).
    public static var text: String {
        var output = ""
        write(value, indent: 0, into: &output)
        return output + "\n"
    }

    /// What each error code means, in the order of the document (the code comes from the kind).
    static let errorMessages: [(kind: ErrorKind, message: String)] = [
        (.parse, "Parse error"), (.invalidRequest, "Invalid request"), (.methodNotFound, "Method not found"),
        (.invalidParams, "Invalid params (data.diagnostics: [{pointer, reason}])"), (.internal, "Internal error"),
        (.cancelled, "Request cancelled"), (.config, "Configuration problem"),
        (.unknownEnvironment, "Unknown environment"), (.unknownProfile, "Unknown profile"),
        (.auth, "Token acquisition refused (data.oauthError, data.oauthErrorDescription when the server sent them)"),
        (
            .interactionRequired,
            "Interactive login required (data.login: true when the login method can fix it; data.scopes: the scopes that login asks for)"
        ),
        (.transport, "Transport failure (DNS, connect, TLS)"), (.timeout, "Timed out"),
        (.limit, "A limit was exceeded (queue, body size, failed logins)"),
        (.shuttingDown, "The server is shutting down"), (.notSupported, "Not supported by this build or configuration"),
        (.loggedOut, "A logout ended the session the request was waiting on for a token"),
        (
            .store,
            "The session store could not be read or written (locked by another program, a disk failure, "
                + "a record that does not open under the store's key)"
        ),
    ]

    static let information =
        "JSON-RPC 2.0 over stdin/stdout (NDJSON or Content-Length framing). Methods a client calls have x-direction client-to-server; notifications the server sends have x-direction server-to-client. x-status planned marks what this build does not implement yet. Every error's data carries a stable kind. Absent params, \"params\": null and [] all mean no params, and an object-typed member given as [] is an empty object (Lua and Emacs encode an empty table so). A notification (a method and no id) is never answered, even when invalid. tokenrelay's own methods reject unknown members; initialize ignores them. No code takes a meaning LSP reserves (-32001, -32002, -32803..-32801)."

    private static func build() -> JSONValue {
        var errors = JSONObject()
        for (kind, message) in errorMessages {
            errors[kind.rawValue] = [
                "code": .int(ErrorCode(kind: kind).rawValue), "message": .string(message),
                "data": ["kind": .string(kind.rawValue)],
            ]
        }
        return [
            "openrpc": "1.3.2",
            "info": [
                "title": "tokenrelay", "version": .string(RelayServer.version), "description": .string(information),
                "x-protocolVersion": .string(RelayServer.protocolVersion),
            ],
            "methods": .array(MethodCatalog.documented.map { $0.openRPC.jsonValue }),
            "components": ["errors": .object(errors)],
        ]
    }

    /// Pretty-prints `value` (members in their order, two spaces per level).
    private static func write(_ value: JSONValue, indent: Int, into output: inout String) {
        let inner = String(repeating: " ", count: indent + 2)
        switch value {
        case .object(let object) where !object.members.isEmpty:
            output += "{\n"
            for (index, member) in object.members.enumerated() {
                output += inner + JSONValue.string(member.key).jsonText + ": "
                write(member.value, indent: indent + 2, into: &output)
                output += index + 1 < object.members.count ? ",\n" : "\n"
            }
            output += String(repeating: " ", count: indent) + "}"
        case .array(let items) where !items.isEmpty:
            output += "[\n"
            for (index, item) in items.enumerated() {
                output += inner
                write(item, indent: indent + 2, into: &output)
                output += index + 1 < items.count ? ",\n" : "\n"
            }
            output += String(repeating: " ", count: indent) + "]"
        default:
            output += value.jsonText
        }
    }
}
