import Testing
import TokenRelayConfig
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `config-reload`'s result type: the exact wire text, `profile` absent for an environment
/// without profiles, and agreement with its OpenRPC schema.
@Suite struct ConfigReloadMethodResultTests {
    static let result = ConfigReloadMethod.Result(
        added: [.init(environment: "new", profile: nil)], changed: [.init(environment: "e", profile: "p")],
        removed: [])

    @Test func everyMemberInTheOrderTheWireAlwaysHadIt() {
        #expect(
            Self.result.resultValue.jsonText
                == #"{"added":[{"environment":"new"}],"changed":[{"environment":"e","profile":"p"}],"removed":[]}"#)
    }

    @Test func theResultAgreesWithTheSchemaTheMethodDeclares() {
        let schema = ConfigReloadMethod.Result.schema
        #expect(ConfigReloadMethod.openRPC.result == schema)
        #expect(ResultSchema.problems(Self.result.resultValue, schema).isEmpty)
        #expect(ResultSchema.members(Self.result.resultValue) == ResultSchema.declared(schema))
        let withProfile = Self.result.resultValue["changed"]?.arrayValue?.first ?? .null
        #expect(
            ResultSchema.members(withProfile)
                == ResultSchema.declared(ConfigReloadMethod.Result.entriesSchema["items"] ?? .null))
    }
}
