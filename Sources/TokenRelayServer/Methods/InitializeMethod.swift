import TokenRelayJSONRPC

/// `initialize`: optional handshake. Reads the two members it uses and ignores every other one:
/// LSP clients fill it with `rootUri`, `workspaceFolders`, `capabilities` of any shape,
/// `clientInfo`, `initializationOptions`, `trace`, `workDoneToken`... (SPEC §4.2).
enum InitializeMethod: RelayMethod {
    static let method = "initialize"

    struct Params: MethodParams {
        var processID: Int32?

        init(decoding params: JSONValue?) throws(RPCError) {
            var reader = try ParamReader(params, allowed: ["processId", "protocolVersion"], unknownMembers: .ignore)
            processID = reader.integer("processId", in: 0...Int(Int32.max)).map { Int32($0) }
            _ = reader.string("protocolVersion")
            try reader.finish()
        }
    }

    /// `{serverInfo, protocolVersion, environments, capabilities}`: names and types only, never a
    /// URL or a secret.
    struct Result: MethodResult {
        /// `serverInfo.name`.
        var serverName = RelayServer.name
        /// `serverInfo.version`.
        var serverVersion = RelayServer.version
        /// The protocol revision this build speaks.
        var protocolVersion = RelayServer.protocolVersion
        /// The configured environments and their profiles.
        var environments: [EnvironmentCatalog.Environment]
        /// The request methods served (listed sorted).
        var methods: [String]

        var resultValue: JSONValue {
            let environments: [JSONValue] = environments.map { environment in
                .object([
                    "name": .string(environment.name),
                    "default": .bool(environment.isDefault),
                    "profiles": .array(
                        environment.profiles.map { .object(["name": .string($0.name), "type": .string($0.type)]) }),
                ])
            }
            return .object([
                "serverInfo": ["name": .string(serverName), "version": .string(serverVersion)],
                "protocolVersion": .string(protocolVersion),
                "environments": .array(environments),
                "capabilities": [
                    "framings": ["ndjson", "lsp"],
                    "batches": true,
                    "cancellation": ["$/cancelRequest", "notifications/cancelled"],
                    "methods": .array(methods.sorted().map { .string($0) }),
                ],
            ])
        }

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(
            [
                "serverInfo": Schema.object(["name": ["const": "tokenrelay"], "version": Schema.string]),
                "protocolVersion": ["const": .string(RelayServer.protocolVersion)],
                "environments": ["type": "array", "items": environmentSchema],
                "capabilities": ["type": "object"],
            ], required: ["serverInfo", "protocolVersion", "environments", "capabilities"])

        /// One entry of `environments`.
        static let environmentSchema = Schema.object([
            "name": Schema.string, "default": Schema.boolean,
            "profiles": [
                "type": "array", "items": Schema.object(["name": Schema.string, "type": Schema.string]),
            ],
        ])
    }

    static func handle(_ params: Params, in context: MethodContext) async throws -> Result {
        let server = context.server
        if let processID = params.processID { server.watchParent(processID) }
        return Result(environments: server.catalog.environments, methods: MethodCatalog.requests.map { $0.method })
    }

    /// The LSP members editors send that `initialize` accepts and ignores.
    static let ignoredLSPMembers = [
        "clientInfo", "capabilities", "rootPath", "rootUri", "workspaceFolders", "initializationOptions", "trace",
        "locale", "workDoneToken",
    ]

    static let openRPC = MethodDescription(
        name: method,
        summary: "Optional handshake: server info, environments and profiles (names and types only), capabilities.",
        description:
            "Accepts and ignores every member it does not use (LSP clients send rootUri, workspaceFolders, capabilities of any shape, clientInfo, initializationOptions, trace, workDoneToken...).",
        params: [
            param("processId", "Parent process id: tokenrelay exits when it dies.", ["type": ["integer", "null"]]),
            param("protocolVersion", "The revision the client speaks (read, not enforced).", Schema.string),
        ] + ignoredLSPMembers.map { param($0, "LSP member: accepted and ignored, of any shape.", Schema.any) },
        result: Result.schema)
}
