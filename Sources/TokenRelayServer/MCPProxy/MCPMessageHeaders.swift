import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC

/// What the proxy reads of one message from the MCP client, and the request metadata headers
/// the Streamable HTTP transport mirrors from it (2026-07-28: `Mcp-Method`, `Mcp-Name`,
/// `MCP-Protocol-Version`). Pure.
struct MCPMessage: Sendable {
    /// The message as received (sent on unchanged).
    let bytes: [UInt8]
    /// Its `id`, when it has one (requests and responses).
    let id: JSONValue?
    /// Its `method`, when it has one (requests and notifications).
    let method: String?
    /// `params.name` or `params.uri` (`tools/call`, `prompts/get`, `resources/read`).
    let name: String?
    /// The protocol version the message carries in `params._meta` (2026-07-28 and later).
    let protocolVersion: String?
    /// `params.arguments` of a `tools/call`.
    let arguments: JSONValue?
    /// `params._meta` (2026-07-28: the protocol version and the client's capabilities and info).
    let meta: JSONValue?
    /// The request a `notifications/cancelled` cancels (its `requestId`).
    let cancelledID: JSONValue?

    /// The protocol version key of a message's `_meta`.
    static let protocolVersionMetaKey = "io.modelcontextprotocol/protocolVersion"

    /// Reads `bytes`; `nil` when they are not one JSON-RPC object.
    init?(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes), let object = value.objectValue else { return nil }
        self.bytes = bytes
        id = object["id"]
        method = object["method"]?.stringValue
        let params = object["params"]?.objectValue
        switch method {
        case "tools/call", "prompts/get": name = params?["name"]?.stringValue
        case "resources/read": name = params?["uri"]?.stringValue
        default: name = nil
        }
        protocolVersion = params?["_meta"]?[Self.protocolVersionMetaKey]?.stringValue
        arguments = method == "tools/call" ? params?["arguments"] : nil
        meta = params?["_meta"]
        cancelledID = method == "notifications/cancelled" && id == nil ? params?["requestId"] : nil
    }

    /// A request: it has a method and an id, and the client waits for an answer.
    var isRequest: Bool { method != nil && id != nil && id != .null }

    /// The headers of the POST carrying this message. `negotiated`: the version an `initialize`
    /// answer gave (handshake era); the message's own `_meta` version wins.
    func headers(sessionID: String?, negotiated: String?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Accept", value: "application/json, text/event-stream")
        if let version = protocolVersion ?? negotiated, Self.isHeaderSafe(version) {
            headers.add(name: "MCP-Protocol-Version", value: version)
        }
        if let sessionID { headers.add(name: "Mcp-Session-Id", value: sessionID) }
        if let method, isRequest { headers.add(name: "Mcp-Method", value: Self.headerValue(method)) }
        if let name { headers.add(name: "Mcp-Name", value: Self.headerValue(name)) }
        return headers
    }

    /// A value as a header carries it: as it is when it is plain visible ASCII (spaces inside
    /// allowed), else in the Base64 sentinel form `=?base64?...?=` (also for a plain value that
    /// looks like the sentinel).
    static func headerValue(_ value: String) -> String {
        let looksEncoded = value.hasPrefix("=?base64?") && value.hasSuffix("?=")
        if isHeaderSafe(value) && !looksEncoded { return value }
        return "=?base64?" + Data(value.utf8).base64EncodedString() + "?="
    }

    /// Visible ASCII and inner spaces only, no leading or trailing space.
    static func isHeaderSafe(_ value: String) -> Bool {
        guard let first = value.utf8.first, let last = value.utf8.last, first != 0x20, last != 0x20 else {
            return false
        }
        return value.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E }
    }

    /// The JSON-RPC error answer to `id` the proxy makes itself (its `data.kind` included).
    /// An answer the proxy makes itself: its code is mapped as the MCP face maps its own
    /// (``MCPProtocol/mapError(_:)``), so a tokenrelay code in the range MCP reserves (-32020 is
    /// `http_status` here, HeaderMismatch to a 2026-07-28 client) cannot be misread; `data.kind` says it.
    static func errorAnswer(id: JSONValue, error: RPCError) -> [UInt8] {
        let mapped = MCPProtocol.mapError(error)
        return JSONValue.object(JSONObject([("jsonrpc", .string("2.0")), ("id", id), ("error", mapped.jsonValue)]))
            .serialized()
    }
}
