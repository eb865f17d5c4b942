import Testing
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `initialize`'s result type: the exact wire text and agreement with its OpenRPC schema.
@Suite struct InitializeMethodResultTests {
    static let result = InitializeMethod.Result(
        environments: [
            .init(name: "a", isDefault: true, profiles: [.init(name: "p", type: "client_credentials")]),
            .init(name: "b", isDefault: false, profiles: []),
        ], methods: ["status", "ping", "request"])

    @Test func everyMemberInTheOrderTheWireAlwaysHadIt() {
        let expected =
            #"{"serverInfo":{"name":"tokenrelay","version":"\#(RelayServer.version)"},"protocolVersion":"\#(RelayServer.protocolVersion)","environments":[{"name":"a","default":true,"profiles":[{"name":"p","type":"client_credentials"}]},{"name":"b","default":false,"profiles":[]}],"capabilities":{"framings":["ndjson","lsp"],"batches":true,"cancellation":["$/cancelRequest","notifications/cancelled"],"methods":["ping","request","status"]}}"#
        #expect(Self.result.resultValue.jsonText == expected)
    }

    @Test func theResultAgreesWithTheSchemaTheMethodDeclares() {
        let schema = InitializeMethod.Result.schema
        #expect(InitializeMethod.openRPC.result == schema)
        #expect(ResultSchema.problems(Self.result.resultValue, schema).isEmpty)
        #expect(ResultSchema.members(Self.result.resultValue) == ResultSchema.declared(schema))
        let environment = Self.result.resultValue["environments"]?.arrayValue?.first ?? .null
        #expect(ResultSchema.members(environment) == ResultSchema.declared(InitializeMethod.Result.environmentSchema))
    }
}
