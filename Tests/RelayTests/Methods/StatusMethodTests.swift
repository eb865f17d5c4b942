import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayJSONRPC

@testable import TokenRelayAuth
@testable import TokenRelayServer

/// `status`'s result type: the exact wire text, optional members absent when nil, and agreement
/// with its OpenRPC schema.
@Suite struct StatusMethodResultTests {
    static let expiry = Date(timeIntervalSince1970: 1_800_000_000)

    static let full = StatusMethod.Result(
        sessions: [
            SessionStatus(
                environment: "e", profile: "p", type: "authorization_code", state: .valid, expiresAt: expiry,
                refreshable: true, lastError: (kind: .auth, message: "refused"),
                counters: .init(acquisitions: 1, renewals: 2, recoveries: 3, requests: 4), fromStore: true,
                identity: LoginIdentity(subject: "s", email: "m@example.com", name: "N"))
        ], subscriptions: 2,
        store: TokenStoreInfo(
            type: "sqlite", path: "/x.db", encrypted: true, schemaVersion: 3,
            shared: SharedTierInfo(
                type: "postgres", state: "unavailable", since: Date(timeIntervalSince1970: 1_700_000_000)),
            key: "secret_service", note: "sealed with a key from the secret service"),
        storeError: (kind: .config, message: "locked"))

    static let minimal = StatusMethod.Result(
        sessions: [
            SessionStatus(
                environment: "e", profile: "p", type: "client_credentials", state: .none, expiresAt: nil,
                refreshable: false, lastError: nil, counters: .init())
        ], subscriptions: 0, store: TokenStoreInfo(type: "memory"))

    @Test func everyMemberInTheOrderTheWireAlwaysHadIt() {
        #expect(
            Self.full.resultValue.jsonText
                == #"{"sessions":[{"environment":"e","profile":"p","type":"authorization_code","state":"valid","expiresAt":"2027-01-15T08:00:00Z","refreshable":true,"fromStore":true,"subject":"s","email":"m@example.com","name":"N","lastError":{"kind":"auth","message":"refused"},"counters":{"acquisitions":1,"renewals":2,"recoveries":3,"requests":4}}],"subscriptions":2,"store":{"type":"sqlite","encrypted":true,"path":"/x.db","schemaVersion":3,"key":"secret_service","note":"sealed with a key from the secret service","error":{"kind":"config","message":"locked"},"shared":{"type":"postgres","state":"unavailable","since":"2023-11-14T22:13:20Z"}}}"#
        )
    }

    @Test func optionalMembersAreAbsentWhenNil() {
        #expect(
            Self.minimal.resultValue.jsonText
                == #"{"sessions":[{"environment":"e","profile":"p","type":"client_credentials","state":"none","refreshable":false,"fromStore":false,"counters":{"acquisitions":0,"renewals":0,"recoveries":0,"requests":0}}],"subscriptions":0,"store":{"type":"memory","encrypted":false}}"#
        )
    }

    @Test func theSchemaDeclaresExactlyTheMembersTheResultTypeProduces() throws {
        let schema = StatusMethod.openRPC.result
        #expect(schema == StatusMethod.Result.schema)
        for result in [Self.full, Self.minimal] {
            #expect(ResultSchema.problems(result.resultValue, StatusMethod.Result.schema).isEmpty)
        }
        let fullSession = try #require(Self.full.resultValue["sessions"]?.arrayValue?.first)
        let minimalSession = try #require(Self.minimal.resultValue["sessions"]?.arrayValue?.first)
        #expect(ResultSchema.members(fullSession) == ResultSchema.declared(StatusMethod.sessionSchema))
        #expect(ResultSchema.members(minimalSession) == ResultSchema.required(StatusMethod.sessionSchema))
        let fullStore = try #require(Self.full.resultValue["store"])
        let minimalStore = try #require(Self.minimal.resultValue["store"])
        #expect(ResultSchema.members(fullStore) == ResultSchema.declared(StatusMethod.storeSchema))
        #expect(ResultSchema.members(minimalStore) == ResultSchema.required(StatusMethod.storeSchema))
    }

    @Test func noTokenValueAppearsEvenWhenOneIsHeld() {
        // A status result has no member that could carry a token: it is built from SessionStatus.
        #expect(!Self.full.resultValue.jsonText.contains("access_token"))
    }
}
