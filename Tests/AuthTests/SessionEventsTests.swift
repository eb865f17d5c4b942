import Foundation
import TestSupport
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// Session events (SPEC §13.1): told once per change while someone watches, nothing otherwise,
/// and the changes another connection to the store makes seen through its change check.
@Suite(.timeLimit(.minutes(5)))
struct SessionEventsTests {
    /// The session changes the manager emitted, once it is closed (its event stream ends).
    static func changes(_ manager: TokenManager) async -> [SessionChange] {
        await manager.close()
        var changes: [SessionChange] = []
        for await event in manager.events {
            if case .sessionChanged(let change) = event { changes.append(change) }
        }
        return changes
    }

    @Test func nothingIsToldOrLookedForWithoutAWatcher() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-unwatched")))
        _ = try await h.token()
        await h.manager.invalidate()
        _ = try await h.manager.logout()
        #expect(await !h.manager.isWatched)
        #expect(await Self.changes(h.manager).isEmpty)
    }

    @Test func changesThisProcessMakesAreToldOnceEach() async throws {
        let h = try await Harness()
        await h.manager.watchSessions()
        h.transport.enqueue(.success(tokenResponse("at-watched-1")))
        h.transport.enqueue(.success(tokenResponse("at-watched-2")))
        _ = try await h.token()
        _ = try await h.token()  // held: no change
        await h.manager.invalidate()
        _ = try await h.token()
        _ = try await h.manager.logout()
        _ = try await h.manager.logout()  // nothing left: no change
        let changes = await Self.changes(h.manager)
        #expect(changes.map(\.reason) == [.valid, .invalidated, .valid, .loggedOut])
        #expect(changes.map(\.state) == [.valid, .expired, .valid, .none])
        #expect(changes.allSatisfy { $0.environment == "staging" && $0.profile == "service" })
        #expect(changes[0].expiresAt != nil && changes[3].expiresAt == nil)
    }

    @Test func aTokenThatReachesItsExpiryUnrenewedIsToldExpiredOnce() async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(tokenResponse("at-expiring", expiresIn: 60)))
        _ = try await h.token()
        await h.manager.watchSessions()
        var seen = h.manager.events.compactMap { event -> SessionChange? in
            if case .sessionChanged(let change) = event { change } else { nil }
        }.makeAsyncIterator()
        // The watch's next look (a sleep on the fake clock) comes after the expiry.
        await h.clock.sleepersRegistered.wait(for: 1)
        h.clock.advance(by: 120)
        let expired = await seen.next()
        #expect(expired?.reason == .expired)
        #expect(expired?.state == .expired)
        h.transport.enqueue(.success(tokenResponse("at-renewed", expiresIn: 3600)))
        _ = try await h.token()
        let renewed = await seen.next()
        #expect(renewed?.reason == .valid)
        await h.manager.close()
        let end = await seen.next()
        #expect(end == nil)
    }

    @Test func unwatchingStopsTheWatch() async throws {
        let h = try await Harness()
        await h.manager.watchSessions()
        await h.manager.watchSessions()
        await h.manager.unwatchSessions()
        #expect(await h.manager.isWatched)
        await h.manager.unwatchSessions()
        #expect(await !h.manager.isWatched)
        h.transport.enqueue(.success(tokenResponse("at-after")))
        _ = try await h.token()
        #expect(await Self.changes(h.manager).isEmpty)
    }

    @Test func whatAnotherConnectionChangesIsSeenThroughTheStoreOnceEach() async throws {
        let directory = try StoreDirectory()
        let configuration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "svc", clientSecret: .value(clientSecretCanary))
        let watcherTransport = FakeTransport()
        let watcher = TokenManager(transport: watcherTransport, store: SQLiteTokenStore(path: directory.database))
        let otherTransport = FakeTransport()
        let other = TokenManager(transport: otherTransport, store: SQLiteTokenStore(path: directory.database))
        let key = try await watcher.register(environment: "dev", profile: "svc", configuration: configuration)
        _ = try await other.register(environment: "dev", profile: "svc", configuration: configuration)
        await watcher.watchSessions()
        var seen = watcher.events.compactMap { event -> SessionChange? in
            if case .sessionChanged(let change) = event { change } else { nil }
        }.makeAsyncIterator()
        otherTransport.enqueue(.success(tokenResponse("at-elsewhere")))
        _ = try await other.token(for: key)
        let acquired = await seen.next()
        #expect(acquired?.reason == .valid)
        #expect(await other.invalidate(environment: "dev") == 1)
        let invalidated = await seen.next()
        #expect(invalidated?.reason == .invalidated)
        _ = try await other.logout()
        let loggedOut = await seen.next()
        #expect(loggedOut?.reason == .loggedOut)
        #expect(loggedOut?.state == SessionStatus.State.none)
        await other.close()
        #expect(watcherTransport.requests.isEmpty)
        await watcher.close()
        let end = await seen.next()
        #expect(end == nil)
    }

    /// Every grant but a `refresh_token` seed's knows where its session lives from registration:
    /// a watched `jwt_bearer` session (a token exchange's too) sees another connection's
    /// acquisition. Before, only client credentials and interactive sessions did: the others'
    /// changes elsewhere were never told.
    @Test func aWatchedAssertionGrantSessionSeesAnotherConnectionsAcquisition() async throws {
        let directory = try StoreDirectory()
        let configuration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "svc", clientAuth: .none,
            grant: .jwtBearer(.secret(.value("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"))))
        let watcher = TokenManager(transport: FakeTransport(), store: SQLiteTokenStore(path: directory.database))
        let otherTransport = FakeTransport()
        let other = TokenManager(transport: otherTransport, store: SQLiteTokenStore(path: directory.database))
        let key = try await watcher.register(environment: "dev", profile: "jwt", configuration: configuration)
        _ = try await other.register(environment: "dev", profile: "jwt", configuration: configuration)
        await watcher.watchSessions()
        var seen = watcher.events.compactMap { event -> SessionChange? in
            if case .sessionChanged(let change) = event { change } else { nil }
        }.makeAsyncIterator()
        otherTransport.enqueue(.success(tokenResponse("at-jwt-elsewhere")))
        _ = try await other.token(for: key)
        let acquired = await seen.next()
        #expect(acquired?.reason == .valid)
        #expect(acquired?.profile == "jwt")
        await other.close()
        await watcher.close()
    }

    @Test func aStoreChangeIsNamedByWhatItDid() {
        typealias View = SessionWatch.View
        let received = Date(timeIntervalSince1970: 1_700_000_000)
        let present = View(
            revision: 1, receivedAt: received, invalidated: false, loginRequired: false, logoutEpoch: 1)
        let absent = View(revision: nil, invalidated: false, loginRequired: false, logoutEpoch: 1)
        let entry = StoredTokens(accessToken: "x", receivedAt: received, revision: 1)
        func changes(_ view: View, _ stored: StoredTokens?, epoch: Int64 = 1, interactive: Bool = false)
            -> [SessionChange.Reason]
        {
            TokenManager.storeChanges(from: view, to: stored, logoutEpoch: epoch, interactive: interactive)
        }
        #expect(changes(absent, nil) == [])
        #expect(changes(absent, entry) == [.valid])
        #expect(changes(absent, entry, interactive: true) == [.loggedIn])
        #expect(changes(present, entry) == [])
        #expect(changes(present, StoredTokens(accessToken: "x", receivedAt: received, revision: 2)) == [.valid])
        #expect(
            changes(present, StoredTokens(accessToken: "x", receivedAt: received, revision: 1, invalidated: true))
                == [.invalidated])
        #expect(changes(present, nil, epoch: 2) == [.loggedOut])
        #expect(changes(present, nil) == [.refreshFailed])
        // Removed and saved again between two looks: the revision starts again at 1.
        let later = StoredTokens(accessToken: "y", receivedAt: received.addingTimeInterval(5), revision: 1)
        #expect(changes(present, later, epoch: 2) == [.loggedOut, .valid])
        #expect(changes(present, later, epoch: 2, interactive: true) == [.loggedOut, .loggedIn])
        #expect(changes(present, later) == [.valid])
        #expect(changes(absent, later, epoch: 2) == [.valid])
    }
}
