import TokenRelayJSONRPC

/// `unsubscribe {subscription}`: closes it (and cancels a pending token acquisition).
enum UnsubscribeMethod: RelayMethod {
    static let method = "unsubscribe"

    struct Params: MethodParams {
        var subscription: String

        init(decoding params: JSONValue?) throws(RPCError) {
            var reader = try ParamReader(params, allowed: ["subscription"])
            let id = reader.string("subscription", required: true)
            try reader.finish()
            guard let id else { throw RPCError.invalidParams(reader.diagnostics) }
            subscription = id
        }
    }

    static func handle(_ params: Params, in context: MethodContext) async throws -> JSONValue {
        try await context.server.subscriptions.unsubscribe(id: params.subscription)
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Closes a subscription (and cancels a pending token acquisition).",
        params: [param("subscription", required: true, Schema.string)],
        result: Schema.object(["subscription": Schema.string, "closed": Schema.boolean]))
}
