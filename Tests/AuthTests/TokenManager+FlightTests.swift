import Foundation
import Synchronization
import Testing
import TokenRelayErrorKinds

@testable import TokenRelayAuth

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

/// A change made by another process while a flight is under way (SPEC §5.6: seen on the next
/// request, never later), on a real SQLite store shared by two managers.
@Suite struct TokenManagerChangeDuringAFlightTests {
    @Test func anInvalidationElsewhereSeenWhileAFlightCommitsIsHonouredByTheNextUse() async throws {
        let directory = try StoreDirectory()
        let configuration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "svc", clientSecret: .value(clientSecretCanary))
        let store = SaveHeldStore(SQLiteTokenStore(path: directory.database))
        let transport = FakeTransport.counting()
        let manager = TokenManager(transport: transport, store: store, clock: FakeClock())
        let key = try await manager.register(environment: "dev", profile: "svc", configuration: configuration)
        // Another process on the same file.
        let other = TokenManager(
            transport: FakeTransport.counting(), store: SQLiteTokenStore(path: directory.database), clock: FakeClock())
        try await other.register(environment: "dev", profile: "svc", configuration: configuration)

        #expect(try await manager.token(for: key).accessToken == "at-1")
        #expect(await manager.invalidate() == 1)
        store.holdAfterSave()
        let renewal = Task { try await manager.token(for: key) }
        // at-2 is committed; the flight has not finished yet.
        await store.savesDone.wait(for: 2)
        #expect(await other.invalidate() == 1, "recorded on the entry just committed")
        // Another caller's change check sees that invalidation while the flight is still under way.
        let joined = Task { try await manager.token(for: key) }
        await waitUntil { await manager.waiterCount(key) == 2 }
        store.release()
        #expect(try await renewal.value.accessToken == "at-2")
        #expect(try await joined.value.accessToken == "at-2")
        // The store's queue is idle (its lease release ran before this read), so the next change
        // check answers from `data_version`, not "busy, so changed".
        _ = try await store.load(StoreKey(session: key))
        // The next use honours it: at-2 was invalidated elsewhere, so it is renewed, not handed out.
        #expect(try await manager.token(for: key).accessToken == "at-3")
        #expect(transport.tokenRequests.count == 3)
    }
}

/// Forwards to a real store; after ``holdAfterSave()``, a save that has committed waits until
/// ``release()`` before it returns (the window between a flight's commit and its end).
final class SaveHeldStore: TokenStore {
    private let base: any TokenStore
    private let gate = HoldGate()
    /// Counts committed saves.
    let savesDone = CountWatcher()

    init(_ base: any TokenStore) { self.base = base }

    func holdAfterSave() { gate.hold() }

    func release() { gate.release() }

    var info: TokenStoreInfo { base.info }
    func open() async throws { try await base.open() }
    func load(_ key: StoreKey) async throws -> StoredTokens? { try await base.load(key) }

    func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64? {
        let revision = try await base.save(tokens, for: key, logoutEpoch: logoutEpoch)
        savesDone.increment()
        await gate.pass()
        return revision
    }

    func remove(_ key: StoreKey) async throws { try await base.remove(key) }
    func logoutEpoch(_ key: StoreKey) async throws -> Int64 { try await base.logoutEpoch(key) }
    func logOut(_ key: StoreKey) async throws { try await base.logOut(key) }
    func recordInvalidation(_ key: StoreKey, revision: Int64?) async throws -> Bool {
        try await base.recordInvalidation(key, revision: revision)
    }
    func changedElsewhere() -> Bool { base.changedElsewhere() }
    func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    {
        try await base.acquireLease(key, purpose: purpose, deadline: deadline, expiresAt: expiresAt)
    }
    func releaseLease(_ lease: StoreLease) { base.releaseLease(lease) }
    func isSeedSpent(_ fingerprint: String) async throws -> Bool { try await base.isSeedSpent(fingerprint) }
    func markSeedSpent(_ fingerprint: String) async throws { try await base.markSeedSpent(fingerprint) }
    func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) async throws -> Int {
        try await base.recordUnexplainedRenewal(key, at: date, window: window)
    }
    func clearUnexplainedRenewals(_ key: StoreKey) async throws { try await base.clearUnexplainedRenewals(key) }

    func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        try await base.loadRegistration(issuer: issuer)
    }

    func saveRegistration(_ registration: ClientRegistration) async throws {
        try await base.saveRegistration(registration)
    }

    func removeRegistration(issuer: String) async throws { try await base.removeRegistration(issuer: issuer) }
}

/// A session read from the store ahead of its first use (`readAhead`, what a one-shot `call`
/// does while libcurl loads): the read alone, nothing sent, and the use that follows finds it.
@Suite struct TokenManagerReadAheadTests {
    @Test func aValidStoredTokenReadAheadIsUsedWithoutAnotherReadOrARequest() async throws {
        let h = try await Harness()
        h.storeToken("at-stored", expiresIn: 3600)
        await h.manager.readAhead(h.key)?.value
        #expect(h.store.loads.count == 1)
        #expect(try await h.token().accessToken == "at-stored")
        #expect(h.store.loads.count == 1)
        #expect(h.transport.requests.isEmpty)
        // Read already: nothing more to do.
        #expect(await h.manager.readAhead(h.key) == nil)
    }

    @Test func aReadAheadOfAnExpiredTokenSendsNothingAndLeavesTheRenewalToTheUse() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.storeToken("at-old", expiresIn: -3600, age: 7200, refreshToken: "rt-stored")
        await h.manager.readAhead(h.key)?.value
        #expect(h.transport.requests.isEmpty)
        // One read, and no lease: a renewal would have read again under its lease.
        #expect(h.store.loads.count == 1)
        let status = try #require(await h.manager.status().first)
        #expect(status.lastError == nil)
        #expect(status.counters.renewals == 0)

        h.transport.enqueue(.success(tokenResponse("at-new", expiresIn: 3600, refreshToken: "rt-new")))
        #expect(try await h.token().accessToken == "at-new")
        #expect(h.transport.tokenRequests.count == 1)
        #expect(Harness.form(try #require(h.transport.tokenRequests.first))["refresh_token"] == "rt-stored")
    }

    @Test func aCallerArrivingDuringTheReadIsAnswered() async throws {
        let h = try await Harness()
        h.storeToken("at-old", expiresIn: -3600, age: 7200)
        h.store.holdLoads()
        let read = try #require(await h.manager.readAhead(h.key))
        await h.store.loads.wait(for: 1)
        h.transport.enqueue(.success(tokenResponse("at-new", expiresIn: 3600)))
        // With a deadline, a caller's timer starts once it waits on the flight: the signal that it
        // has joined.
        let caller = Task { try await h.token(deadline: h.clock.now.addingTimeInterval(600)) }
        await h.clock.sleepersRegistered.wait(for: 1)
        h.store.release()
        #expect(try await caller.value.accessToken == "at-new")
        await read.value
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func aLogoutDuringTheReadIsNotUndoneByWhatWasRead() async throws {
        let h = try await Harness()
        h.storeToken("at-stored", expiresIn: 3600)
        h.store.holdLoads()
        let read = try #require(await h.manager.readAhead(h.key))
        await h.store.loads.wait(for: 1)
        // The logout starts (the session's generation moves on at once), then reads the store too.
        let logout = Task { try await h.manager.logout(environment: "staging") }
        await h.store.loads.wait(for: 2)
        h.store.release()
        #expect(try await logout.value == 1)
        await read.value
        h.transport.enqueue(.success(tokenResponse("at-new", expiresIn: 3600)))
        #expect(try await h.token().accessToken == "at-new")
    }

    @Test func nothingStoredIsNoErrorAndSendsNothing() async throws {
        let h = try await Harness()
        await h.manager.readAhead(h.key)?.value
        #expect(h.transport.requests.isEmpty)
        let status = try #require(await h.manager.status().first)
        #expect(status.lastError == nil)
        #expect(status.state == .none)
    }
}

/// The manager's own tasks (flights, callers' deadlines) run on the executor it is given: a
/// one-shot command's thread, so reading a session starts no cooperative-pool thread.
@Suite struct TokenManagerTaskExecutorTests {
    /// Runs jobs on one serial queue and counts them.
    final class CountingExecutor: TaskExecutor {
        let queue = DispatchQueue(label: "counting-executor")
        let jobs = Atomic<Int>(0)

        func enqueue(_ job: consuming ExecutorJob) {
            jobs.add(1, ordering: .relaxed)
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    @Test func aFlightRunsOnTheGivenExecutor() async throws {
        let executor = CountingExecutor()
        let h = try await Harness(taskExecutor: executor)
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 3600)))
        #expect(executor.jobs.load(ordering: .relaxed) == 0)
        #expect(try await h.token().accessToken == "at-1")
        #expect(executor.jobs.load(ordering: .relaxed) > 0)
    }
}
