import TokenRelayJSONRPC

/// `shutdown`: the dispatcher refuses new requests from here on, in read order (kind
/// `shutting_down`); `exit` then exits with 0.
enum ShutdownMethod: RelayMethod {
    static let method = "shutdown"

    /// `null`.
    struct Result: MethodResult {
        var resultValue: JSONValue { .null }
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result { Result() }

    static let openRPC = MethodDescription(
        name: method, summary: "Stops accepting requests (they get kind shutting_down); exit then exits with 0.",
        result: ["type": "null"])
}
