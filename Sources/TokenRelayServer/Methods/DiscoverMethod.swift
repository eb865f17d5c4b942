import TokenRelayJSONRPC

/// `rpc.discover`: the OpenRPC document (SPEC §7: the same as `schemas/openrpc.json`).
enum DiscoverMethod: RelayMethod {
    static let method = "rpc.discover"

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> JSONValue {
        OpenRPCDocument.value
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Returns this OpenRPC document.", result: ["type": "object"])
}
