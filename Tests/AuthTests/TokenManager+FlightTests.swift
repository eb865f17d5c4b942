import ErrorKinds
import Foundation
import Testing

@testable import Auth

/// A logout racing a flight's commit (SPEC §5.2, §5.6): the logout wins, in memory and in the store.
@Suite struct TokenManagerLogoutDuringCommitTests {
    @Test func logoutWhileTheSaveIsHeldLeavesNoTokenAndTellsTheCallerLoggedOut() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.transport.enqueue(.success(tokenResponse("at-1", refreshToken: "rt-rotated-2")))
        h.store.holdSaves()
        let caller = Task { try await h.token() }
        await h.store.savesStarted.wait(for: 1)
        #expect(try await h.manager.logout(environment: "staging") == 1)
        h.store.release()
        await #expect(throws: AuthError.loggedOut) { try await caller.value }
        #expect(AuthError.loggedOut.errorKind == .loggedOut)
        #expect(h.store.entry(h.key) == nil)
        let status = try #require(await h.manager.status().first)
        #expect(status.state == .none)
        #expect(status.refreshable == false)
        #expect(status.lastError == nil)
        // Nothing comes back on the next use either (the spent seed is not sent again).
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func aRefreshAnsweredAfterALogoutInAnotherManagerOnTheStoreIsNotKept() async throws {
        let h = try await Harness(
            configuration: refreshConfiguration(), transport: .counting(expiresIn: 60, refreshToken: true))
        _ = try await h.token()
        // A second process on the same store (it never used the session).
        let other = TokenManager(transport: FakeTransport.counting(), store: h.store, clock: h.clock)
        try await other.register(environment: "staging", profile: "service", configuration: refreshConfiguration())
        h.clock.advance(by: 61)
        h.transport.hold()
        let renewal = Task { try await h.token() }
        await h.transport.arrivals.wait(for: 2)
        #expect(try await other.logout(environment: "staging") == 1)
        h.transport.release()
        await #expect(throws: AuthError.loggedOut) { try await renewal.value }
        #expect(h.store.entry(h.key) == nil)
        let status = try #require(await h.manager.status().first)
        #expect(status.refreshable == false)
        #expect(status.state == .none)
    }

    @Test func aSaveAfterALogoutElsewhereIsRefusedByTheStore() async throws {
        let store = InMemoryTokenStore()
        let key = StoreKey(session: SessionKey(environment: "e", profile: "p", configuration: refreshConfiguration()))
        let epoch = try await store.logoutEpoch(key)
        #expect(try await store.save(StoredTokens(accessToken: "at-1"), for: key, logoutEpoch: epoch) == 1)
        try await store.logOut(key)
        #expect(try await store.save(StoredTokens(accessToken: "at-2"), for: key, logoutEpoch: epoch) == nil)
        #expect(try await store.load(key) == nil)
        let next = try await store.logoutEpoch(key)
        #expect(next == epoch + 1)
        #expect(try await store.save(StoredTokens(accessToken: "at-3"), for: key, logoutEpoch: next) != nil)
    }
}
