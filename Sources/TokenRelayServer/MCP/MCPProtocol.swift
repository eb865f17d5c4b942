import TokenRelayJSONRPC

/// The MCP revisions `tokenrelay mcp` speaks and what differs between them (SPEC §8):
/// the `initialize` handshake revisions, and the stateless 2026-07-28 one in which every request
/// carries its protocol version and client capabilities in `_meta`.
enum MCPProtocol {
    /// Handshake revisions, newest first.
    static let handshakeVersions = ["2025-11-25", "2025-06-18"]
    /// Stateless revisions, newest first.
    static let statelessVersions = ["2026-07-28"]
    /// Every supported revision, newest first (what an UnsupportedProtocolVersion error lists).
    static let supportedVersions = statelessVersions + handshakeVersions

    static let protocolVersionKey = "io.modelcontextprotocol/protocolVersion"
    static let clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
    static let serverInfoKey = "io.modelcontextprotocol/serverInfo"

    /// `UnsupportedProtocolVersion` (2026-07-28).
    static let unsupportedProtocolVersion = -32022

    /// `{name, version}` of this server.
    static var serverInfo: JSONValue {
        ["name": .string(RelayServer.name), "title": "tokenrelay", "version": .string(RelayServer.version)]
    }

    /// How the server answers a request: the handshake revision negotiated by `initialize`, or
    /// the stateless revision the request's `_meta` names (with the capabilities it declares).
    enum Era: Sendable, Equatable {
        case handshake(version: String?)
        case stateless(version: String, capabilities: JSONValue)

        var isStateless: Bool {
            if case .stateless = self { return true }
            return false
        }
    }

    /// The era of a request whose params are `params`: stateless when its `_meta` names a
    /// protocol version (which must be a supported stateless one: else -32022 listing the
    /// supported versions), else the handshake era.
    static func era(of params: JSONValue?, negotiated: String?) throws(RPCError) -> Era {
        guard let version = params?["_meta"]?[protocolVersionKey] else { return .handshake(version: negotiated) }
        guard case .string(let text) = version, statelessVersions.contains(text) else {
            var error = RPCError(
                code: ErrorCode(rawValue: unsupportedProtocolVersion),
                message: "unsupported protocol version; supported: \(supportedVersions.joined(separator: ", "))",
                data: [
                    "supported": .array(supportedVersions.map { .string($0) }),
                    "requested": version.stringValue.map { .string($0) } ?? .null,
                ])
            error.kind = .notSupported
            throw error
        }
        let capabilities = params?["_meta"]?[clientCapabilitiesKey] ?? .object([:])
        return .stateless(version: text, capabilities: capabilities)
    }

    /// Whether `capabilities` (a client's) allow form-mode elicitation: `elicitation: {}` (form
    /// implied) or `elicitation: {form: {...}}`.
    static func supportsFormElicitation(_ capabilities: JSONValue?) -> Bool {
        guard case .object(let elicitation)? = capabilities?["elicitation"] else { return false }
        return elicitation.isEmpty || elicitation["form"] != nil || elicitation["url"] == nil
    }

    /// `result` as the era wants it: a stateless revision adds `resultType` and the server's
    /// identity in `_meta`.
    static func finish(_ result: JSONObject, era: Era, resultType: String = "complete") -> JSONValue {
        guard era.isStateless else { return .object(result) }
        var result = result
        result["resultType"] = .string(resultType)
        var meta = result["_meta"]?.objectValue ?? JSONObject()
        meta[serverInfoKey] = serverInfo
        result["_meta"] = .object(meta)
        return .object(result)
    }

    /// Remaps errors for an MCP client: the codes from -32020 to -32099 are the MCP
    /// specification's (2026-07-28), so tokenrelay's own codes in that range (transport,
    /// timeout, limit, shutting_down, ...) go out as -32000 with their `data.kind` (MCP leaves
    /// -32000 to -32019 to implementations). Errors built here with an MCP code keep it.
    static func mapError(_ error: RPCError) -> RPCError {
        guard (-32099 ... -32020).contains(error.code.rawValue), error.data["supported"] == nil else { return error }
        var mapped = error
        mapped.code = ErrorCode(rawValue: -32000)
        return mapped
    }
}
