import Testing
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `subscribe`'s result type: the exact wire text and agreement with its OpenRPC schema.
@Suite struct SubscribeMethodResultTests {
    @Test func theReplyCarriesTheSubscriptionIdOnly() {
        let result = SubscribeMethod.Result(subscription: "s-1")
        #expect(result.resultValue.jsonText == #"{"subscription":"s-1"}"#)
        #expect(SubscribeMethod.openRPC.result == SubscribeMethod.Result.schema)
        #expect(ResultSchema.problems(result.resultValue, SubscribeMethod.Result.schema).isEmpty)
        #expect(ResultSchema.members(result.resultValue) == ResultSchema.declared(SubscribeMethod.Result.schema))
    }
}
