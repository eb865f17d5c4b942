import TokenRelayJSONRPC

/// `logout {environment?, profile?, all?}`: drops the sessions' tokens and refresh state (revoking
/// at the server where it offers RFC 7009). Answers `{loggedOut: N}`; a request waiting on one of
/// those sessions' tokens ends with kind `logged_out`.
package enum LogoutMethod: RelayMethod {
    static let method = "logout"

    /// `{loggedOut: N}`: how many sessions were logged out.
    package struct Result: MethodResult, Equatable {
        var loggedOut: Int
        package var resultValue: JSONValue { ["loggedOut": .int(loggedOut)] }
    }

    static func handle(_ params: SessionSelection, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { try await context.tokens($0).logout(params) }
    }

    static let openRPC = MethodDescription(
        name: method,
        summary: "Drops a session's tokens and refresh state (revoking at the server where it offers RFC 7009).",
        params: SharedParams.session + [param("all", Schema.boolean)],
        result: Schema.object(["loggedOut": Schema.integer]),
        errors: [.unknownEnvironment, .unknownProfile, .transport, .timeout, .store] + MethodDescription.standardErrors)
}
