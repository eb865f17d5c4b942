import JSONRPC

/// `token-invalidate {environment?, profile?, all?}`: expires access tokens so the next use
/// renews them; refresh state is kept. Answers `{invalidated: N}`.
enum TokenInvalidateMethod: RelayMethod {
    static let method = "token-invalidate"

    static func handle(_ params: SessionSelection, in context: MethodContext) async throws -> JSONValue {
        try await context.withRuntime { try await context.tokens($0).invalidate(params) }
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Expires access tokens so the next use renews them; refresh state is kept.",
        params: SharedParams.session + [param("all", "Every session.", Schema.boolean)],
        result: Schema.object(["invalidated": Schema.integer], required: ["invalidated"]),
        errors: [.unknownEnvironment, .unknownProfile] + MethodDescription.standardErrors)
}
