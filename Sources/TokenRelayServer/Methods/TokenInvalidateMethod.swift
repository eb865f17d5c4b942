import TokenRelayJSONRPC

/// `token-invalidate {environment?, profile?, all?}`: expires access tokens so the next use
/// renews them; refresh state is kept. Answers `{invalidated: N}`.
package enum TokenInvalidateMethod: RelayMethod {
    static let method = "token-invalidate"

    /// `{invalidated: N}`: how many sessions held a token that is now expired.
    package struct Result: MethodResult, Equatable {
        var invalidated: Int
        package var resultValue: JSONValue { ["invalidated": .int(invalidated)] }
    }

    static func handle(_ params: SessionSelection, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { try await context.tokens($0).invalidate(params) }
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Expires access tokens so the next use renews them; refresh state is kept.",
        params: SharedParams.session + [param("all", "Every session.", Schema.boolean)],
        result: Schema.object(["invalidated": Schema.integer], required: ["invalidated"]),
        errors: [.unknownEnvironment, .unknownProfile, .store] + MethodDescription.standardErrors)
}
