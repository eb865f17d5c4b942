import TokenRelayJSONRPC

/// `ping`: answers `{}`.
enum PingMethod: RelayMethod {
    static let method = "ping"

    /// `{}`.
    struct Result: MethodResult {
        var resultValue: JSONValue { .object([:]) }
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result { Result() }

    static let openRPC = MethodDescription(name: method, summary: "Answers {}.", result: ["type": "object"])
}
