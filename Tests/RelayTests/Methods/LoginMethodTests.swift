import Foundation
import Testing
import TokenRelayJSONRPC

@testable import TokenRelayAuth
@testable import TokenRelayServer

/// `login`'s result type: the exact wire text, optional members absent when nil, and agreement
/// with its OpenRPC schema.
@Suite struct LoginMethodResultTests {
    static let full = LoginMethod.Result(
        environment: "e", profile: "p", expiresAt: Date(timeIntervalSince1970: 1_800_000_000),
        identity: LoginIdentity(subject: "s", email: "m@example.com", name: "N"))

    @Test func everyMemberInTheOrderTheWireAlwaysHadIt() {
        #expect(
            Self.full.resultValue.jsonText
                == #"{"environment":"e","profile":"p","loggedIn":true,"expiresAt":"2027-01-15T08:00:00Z","subject":"s","email":"m@example.com","name":"N"}"#
        )
        #expect(ResultSchema.members(Self.full.resultValue) == ResultSchema.declared(LoginMethod.Result.schema))
    }

    @Test func optionalMembersAreAbsentWhenNil() {
        let minimal = LoginMethod.Result(environment: "e", profile: "p")
        #expect(minimal.resultValue.jsonText == #"{"environment":"e","profile":"p","loggedIn":true}"#)
        #expect(ResultSchema.members(minimal.resultValue) == ResultSchema.required(LoginMethod.Result.schema))
        let subjectOnly = LoginMethod.Result(
            environment: "e", profile: "p", identity: LoginIdentity(subject: "s", email: nil, name: nil))
        #expect(subjectOnly.resultValue.jsonText == #"{"environment":"e","profile":"p","loggedIn":true,"subject":"s"}"#)
    }

    @Test func theResultAgreesWithTheSchemaTheMethodDeclares() {
        #expect(LoginMethod.openRPC.result == LoginMethod.Result.schema)
        #expect(ResultSchema.problems(Self.full.resultValue, LoginMethod.Result.schema).isEmpty)
        let login = LoginResult(expiresAt: nil, identity: nil)
        #expect(
            LoginMethod.Result(login, environment: "e", profile: "p")
                == LoginMethod.Result(environment: "e", profile: "p"))
    }
}
