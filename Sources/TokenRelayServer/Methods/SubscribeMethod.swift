import TokenRelayJSONRPC

/// `subscribe` (params like `request`, GET only, no body, plus `lastEventId` and `untilClosed`): answers
/// `{subscription}` once registered; ``Subscriptions`` runs the stream.
enum SubscribeMethod: RelayMethod {
    static let method = "subscribe"

    /// Refuses a batch first (its stream would hold the batch's answer), then decodes.
    static func decode(_ params: JSONValue?, context: RequestContext) throws -> RequestParams {
        guard !context.inBatch else {
            throw RPCError.invalidRequest(
                "subscribe cannot be used inside a batch (its stream would hold the batch's answer)")
        }
        return try RequestParams.decodeSubscription(params)
    }

    /// `{subscription}`: the id its notifications carry.
    struct Result: MethodResult, Equatable {
        /// The subscription's id.
        var subscription: String
        var resultValue: JSONValue { ["subscription": .string(subscription)] }

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(["subscription": Schema.string], required: ["subscription"])
    }

    static func handle(_ params: RequestParams, in context: MethodContext) async throws -> Result {
        try await context.server.subscriptions.subscribe(params, context: context.request)
    }

    static let openRPC = MethodDescription(
        name: method,
        summary: "Follows a Server-Sent-Events stream; events arrive as event notifications. Rejected inside a batch.",
        params: SharedParams.session + SharedParams.target + [
            param(
                "lastEventId", "Sent as Last-Event-ID on the first connection; no control characters.", Schema.string),
            param(
                "untilClosed",
                "When true, a stream the server ends cleanly ends the subscription (closed, no error) instead of"
                    + " reconnecting; drops and errors still reconnect. Default false.", Schema.boolean),
        ] + SharedParams.tail,
        result: Result.schema,
        errors: MethodDescription.requestErrors)
}

/// `event` (server to client): one SSE event of a subscription.
enum EventNotification: DescribedMethod {
    static let method = "event"
    static let openRPC = MethodDescription.notification(
        method, "One SSE event of a subscription.",
        params: [
            param("subscription", required: true, Schema.string),
            param("id", "Last-event ID in effect at dispatch; absent when none.", Schema.string),
            param("event", "Event type (default message).", required: true, Schema.string),
            param("data", "Data lines joined with \\n.", required: true, Schema.string),
            param("retry", "Present when the event's block carried a valid retry field (ms).", Schema.integer),
        ], direction: .serverToClient)
}

/// `subscription-state` (server to client): a subscription's connection state.
enum SubscriptionStateNotification: DescribedMethod {
    static let method = "subscription-state"
    static let openRPC = MethodDescription.notification(
        method, "A subscription's connection state.",
        params: [
            param("subscription", required: true, Schema.string),
            param("state", required: true, Schema.oneOf(["connecting", "open", "reconnecting", "closed"])),
            param("attempt", Schema.integer), param("retryInMs", Schema.integer), param("status", Schema.integer),
            param("error", Schema.error),
        ], direction: .serverToClient)
}
