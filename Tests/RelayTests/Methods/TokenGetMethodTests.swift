import Foundation
import Testing
import TokenRelayAuth
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `token-get`'s result type: the exact wire text per format, the expiry members absent when the
/// expiry is unknown, and agreement with its OpenRPC schema (exactly one `oneOf` branch).
@Suite struct TokenGetMethodResultTests {
    static let known = Token(
        accessToken: "tok", receivedAt: Date(timeIntervalSince1970: 0),
        expiresAt: Date(timeIntervalSince1970: 1_800_000_000), version: 1)
    static let unknown = Token(
        accessToken: "tok", receivedAt: Date(timeIntervalSince1970: 0), expiresAt: nil, version: 1)

    @Test func eachFormatOnTheWire() {
        #expect(
            TokenGetMethod.Result(token: Self.known, format: .json).resultValue.jsonText
                == #"{"access_token":"tok","token_type":"Bearer","expires_at":"2027-01-15T08:00:00Z"}"#)
        #expect(
            TokenGetMethod.Result(token: Self.known, format: .header).resultValue == "Authorization: Bearer tok")
        #expect(
            TokenGetMethod.Result(token: Self.known, format: .execCredential, version: .v1beta1).resultValue.jsonText
                == #"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"tok","expirationTimestamp":"2027-01-15T08:00:00Z"}}"#
        )
    }

    @Test func expiryMembersAreAbsentWhenTheExpiryIsUnknown() {
        #expect(
            TokenGetMethod.Result(token: Self.unknown, format: .json).resultValue.jsonText
                == #"{"access_token":"tok","token_type":"Bearer"}"#)
        #expect(
            TokenGetMethod.Result(token: Self.unknown, format: .execCredential).resultValue.jsonText
                == #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok"}}"#
        )
    }

    @Test(arguments: TokenFormat.methodFormats)
    func everyFormatMatchesExactlyOneBranchOfTheSchema(_ format: TokenFormat) {
        #expect(TokenGetMethod.openRPC.result == TokenGetMethod.Result.schema)
        for token in [Self.known, Self.unknown] {
            let value = TokenGetMethod.Result(token: token, format: format).resultValue
            #expect(ResultSchema.problems(value, TokenGetMethod.Result.schema).isEmpty)
        }
    }
}
