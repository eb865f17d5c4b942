import JSONRPC
import Logging

extension RelayServer {
    /// Every request method by name.
    func methodTable() -> [String: MethodHandler] {
        var table: [String: MethodHandler] = [
            "initialize": { [self] params, _ in try initialize(params) },
            "shutdown": { params, _ in
                // The dispatcher refuses new requests from here on, in read order.
                try ParamReader.expectNone(params)
                return .null
            },
            "ping": { params, _ in
                try ParamReader.expectNone(params)
                return .object([:])
            },
            "rpc.discover": { params, _ in
                try ParamReader.expectNone(params)
                return try OpenRPCDocument.value()
            },
        ]
        // Each call reads the current runtime once, at its start, and keeps it to its end.
        let runtimes = self.runtimes
        let subscriptions = self.subscriptions
        @Sendable func tokens(_ runtime: RelayRuntime) -> TokenMethods {
            TokenMethods(runtime: runtime, subscriptionCount: { subscriptions.count })
        }
        table["request"] = { params, _ in try await runtimes.use { try await RequestMethod(runtime: $0).handle(params) }
        }
        table["subscribe"] = { params, context in try await subscriptions.subscribe(params, context: context) }
        table["unsubscribe"] = { params, _ in try await subscriptions.unsubscribe(params) }
        table["token-invalidate"] = { params, _ in try await runtimes.use { try await tokens($0).invalidate(params) } }
        table["logout"] = { params, _ in try await runtimes.use { try await tokens($0).logout(params) } }
        table["status"] = { params, _ in try await runtimes.use { try await tokens($0).status(params) } }
        table["token-get"] = { params, _ in try await runtimes.use { try await tokens($0).tokenGet(params) } }
        table["config-reload"] = { [self] params, _ in
            try ParamReader.expectNone(params)
            return try await reload()
        }
        table["login"] = { params, _ in try await runtimes.use { try await LoginMethod(runtime: $0).handle(params) } }
        if options.testMethods {
            table["test/wait"] = { params, _ in
                var reader = try ParamReader(params, allowed: ["ms", "echo"])
                let milliseconds = reader.integer("ms", in: 0...3_600_000) ?? 3_600_000
                let echo = reader.value("echo") ?? .null
                try reader.finish()
                try await Task.sleep(for: .milliseconds(milliseconds))
                return .object(["echo": echo])
            }
        }
        return table
    }

    /// Every notification the server acts on by name (`$/cancelRequest` and
    /// `notifications/cancelled` are handled by the dispatcher; `exit` by
    /// ``readOrderNotificationTable()``).
    func notificationTable() -> [String: MethodHandler] {
        [
            "initialized": { _, _ in .null },
            "notifications/initialized": { _, _ in .null },
        ]
    }

    /// Notifications acted on at once on the reader thread, in read order. `exit` is one: its
    /// exit code (0 after `shutdown`, 1 without) is decided before the next message or the end
    /// of input is seen, so an EOF right behind it cannot win the race and make it 0.
    func readOrderNotificationTable() -> [String: @Sendable (RequestContext) -> Void] {
        [
            "exit": { [termination] context in
                termination.trigger(.exitNotification(afterShutdown: context.afterShutdown))
            }
        ]
    }

    /// `initialize` reads the two members it uses and ignores every other one: LSP clients fill
    /// it with `rootUri`, `workspaceFolders`, `capabilities` of any shape, `clientInfo`,
    /// `initializationOptions`, `trace`, `workDoneToken`... (SPEC §4.2).
    private func initialize(_ params: JSONValue?) throws -> JSONValue {
        var reader = try ParamReader(params, allowed: ["processId", "protocolVersion"], unknownMembers: .ignore)
        let processID = reader.integer("processId", in: 0...Int(Int32.max))
        _ = reader.string("protocolVersion")
        try reader.finish()
        if let processID { watchParent(Int32(processID)) }

        let environments: [JSONValue] = catalog.environments.map { environment in
            .object([
                "name": .string(environment.name),
                "default": .bool(environment.isDefault),
                "profiles": .array(
                    environment.profiles.map { .object(["name": .string($0.name), "type": .string($0.type)]) }),
            ])
        }
        return .object([
            "serverInfo": ["name": .string(Self.name), "version": .string(Self.version)],
            "protocolVersion": .string(Self.protocolVersion),
            "environments": .array(environments),
            "capabilities": [
                "framings": ["ndjson", "lsp"],
                "batches": true,
                "cancellation": ["$/cancelRequest", "notifications/cancelled"],
                "methods": .array(methodTable().keys.sorted().filter { $0 != "test/wait" }.map { .string($0) }),
            ],
        ])
    }
}
