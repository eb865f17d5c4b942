import Foundation
import Testing

@testable import TokenRelayAuth

/// The `sub` of who logged in is kept with the tokens (OpenID Connect), so that a renewal in any
/// process sharing the store can refuse an ID token for another person.
@Suite struct StoredSubjectTests {
    @Test(arguments: [false, true])
    func theSubjectComesBackFromThePlainAndTheSealedStore(sealed: Bool) async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        var tokens = sampleTokens()
        tokens.subject = "alice\u{1B}[2J"
        let provider = sealed ? keyProvider(storeTestKey) : nil
        _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: provider).save(tokens, for: key)
        let loaded = try await SQLiteTokenStore(path: directory.database, encryptionKey: provider).load(key)
        #expect(loaded?.subject == "alice\u{1B}[2J", "kept as the server sent it (compared, never shown)")
    }

    @Test func aRecordWithoutASubjectStillReads() throws {
        let record = Array(#"{"accessToken":"at-1","tokenType":"Bearer","refreshToken":"rt-1"}"#.utf8)
        let payload = try #require(SQLiteTokenStore.Payload(json: record))
        #expect(payload.subject == nil)
        #expect(payload.refreshToken == "rt-1")
        var with = payload
        with.subject = "alice"
        #expect(SQLiteTokenStore.Payload(json: with.json) == with)
    }
}
