import Foundation
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// What credential-helper mode asks of the token manager: `min_valid` renewals and git's
/// `erase` (invalidate only the rejected token, in memory and in the store).
@Suite(.timeLimit(.minutes(5)))
struct CredentialHelperTokenTests {
    @Test func aHeldTokenExpiringSoonerThanMinValidIsRenewedFirst() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 600)))
        h.transport.enqueue(.success(tokenResponse("at-2", expiresIn: 600)))
        #expect(try await h.token().accessToken == "at-1")
        h.clock.advance(by: 500)  // 100 s left: fine without min_valid, too short for 120 s
        #expect(try await h.manager.token(for: h.key, minimumValidity: .seconds(60)).accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
        #expect(try await h.manager.token(for: h.key, minimumValidity: .seconds(120)).accessToken == "at-2")
        #expect(h.transport.tokenRequests.count == 2)
        // The renewed token is everyone's now.
        #expect(try await h.token().accessToken == "at-2")
    }

    @Test func aFreshTokenShorterThanMinValidIsReturnedRatherThanRenewedInALoop() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 30)))
        let token = try await h.manager.token(for: h.key, minimumValidity: .seconds(60))
        #expect(token.accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func aStoredTokenThatDoesNotLastMinValidIsRenewedNotHandedOut() async throws {
        let h = try await Harness()
        h.storeToken("at-stored", expiresIn: 90, age: 3000)
        h.transport.enqueue(.success(tokenResponse("at-new", expiresIn: 3600)))
        #expect(try await h.manager.token(for: h.key, minimumValidity: .seconds(120)).accessToken == "at-new")
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func aStoredTokenThatLastsMinValidIsUsedWithoutARequest() async throws {
        let h = try await Harness()
        h.storeToken("at-stored", expiresIn: 3600)
        #expect(try await h.manager.token(for: h.key, minimumValidity: .seconds(120)).accessToken == "at-stored")
        #expect(h.transport.tokenRequests.isEmpty)
    }

    @Test func eraseOfAnotherTokenChangesNothing() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 3600, refreshToken: "rt-1")))
        _ = try await h.token()
        #expect(try await h.manager.invalidate(h.key, ifAccessToken: "at-0-older") == false)
        #expect(try await h.token().accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
        #expect(h.store.entry(h.key)?.accessToken == "at-1")
    }

    @Test func eraseOfTheCurrentTokenRenewsAndInvalidatesItInTheStoreKeepingTheRefreshToken() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 3600, refreshToken: "rt-1")))
        h.transport.enqueue(.success(tokenResponse("at-2", expiresIn: 3600, refreshToken: "rt-2")))
        _ = try await h.token()
        #expect(try await h.manager.invalidate(h.key, ifAccessToken: "at-1"))
        // Recorded in the store, so no process sharing it hands the rejected token out again.
        let entry = try #require(h.store.entry(h.key))
        #expect(entry.invalidated)
        #expect(entry.refreshToken == "rt-1")
        #expect(try await h.token().accessToken == "at-2")
        #expect(Harness.form(h.transport.tokenRequests[1])["refresh_token"] == "rt-1")
        // Erasing the already-replaced token again is a no-op.
        #expect(try await h.manager.invalidate(h.key, ifAccessToken: "at-1") == false)
    }

    @Test func eraseInAFreshProcessReadsTheStoreFirst() async throws {
        let h = try await Harness()
        h.storeToken("at-stored", expiresIn: 3600)
        #expect(try await h.manager.invalidate(h.key, ifAccessToken: "at-stored"))
        #expect(h.store.entry(h.key)?.invalidated == true)
        #expect(h.transport.tokenRequests.isEmpty)
    }
}
