import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

@Suite(.timeLimit(.minutes(5)))
struct TokenManagerConcurrencyTests {
    @Test func thousandConcurrentCallersShareOneAcquisition() async throws {
        let h = try await Harness(transport: .counting())
        h.transport.hold()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<1000 { group.addTask { try await h.token().accessToken } }
            await h.transport.arrivals.wait(for: 1)
            await waitUntil { await h.manager.waiterCount(h.key) >= 100 }
            h.transport.release()
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(tokens.count == 1000)
        #expect(Set(tokens) == ["at-1"])
        #expect(h.transport.tokenRequests.count == 1)
        let status = await h.manager.status()
        #expect(status.first?.counters.acquisitions == 1)
        #expect(status.first?.counters.requests == 1000)
    }

    @Test func thousandConcurrentCallersShareOneRenewalHeldBehindAGate() async throws {
        let h = try await Harness(transport: .counting(expiresIn: 60))
        #expect(try await h.token().accessToken == "at-1")
        h.clock.advance(by: 61)
        h.transport.hold()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<1000 { group.addTask { try await h.token().accessToken } }
            await h.transport.arrivals.wait(for: 2)
            await waitUntil { await h.manager.waiterCount(h.key) >= 100 }
            h.transport.release()
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(Set(tokens) == ["at-2"])
        #expect(tokens.count == 1000)
        #expect(h.transport.tokenRequests.count == 2)
        #expect(await h.manager.status().first?.counters.renewals == 1)
    }

    @Test func cancellingOneWaiterLeavesTheOthersServed() async throws {
        let h = try await Harness(transport: .counting())
        h.transport.hold()
        let first = Task { try await h.token() }
        let second = Task { try await h.token() }
        await h.transport.arrivals.wait(for: 1)
        await waitUntil { await h.manager.waiterCount(h.key) == 2 }
        first.cancel()
        // Answered while the token request is still held: at once.
        await #expect(throws: CancellationError.self) { try await first.value }
        h.transport.release()
        #expect(try await second.value.accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func cancellingOneWaiterBeforeSendingLeavesTheOthersServed() async throws {
        let h = try await Harness(transport: .counting())
        h.store.holdLoads()
        let first = Task { try await h.token() }
        let second = Task { try await h.token() }
        await h.store.loads.wait(for: 1)
        await waitUntil { await h.manager.waiterCount(h.key) == 2 }
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        h.store.release()
        #expect(try await second.value.accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func cancellingTheLastWaiterBeforeSendingCancelsTheAcquisition() async throws {
        let h = try await Harness(transport: .counting())
        h.store.holdLoads()
        let only = Task { try await h.token() }
        await h.store.loads.wait(for: 1)
        await waitUntil { await h.manager.waiterCount(h.key) == 1 }
        only.cancel()
        // Answered promptly: the store load is still held.
        await #expect(throws: CancellationError.self) { try await only.value }
        h.store.release()
        await h.manager.settleDetached()
        #expect(h.transport.requests.isEmpty)
        // The session still works afterwards.
        #expect(try await h.token().accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func cancellingEveryCallerAfterTheRefreshWasSentStillCommitsTheRotation() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.transport.enqueue(.success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-rotated-2")))
        #expect(try await h.token().accessToken == "at-1")
        #expect(Harness.form(h.transport.tokenRequests[0])["refresh_token"] == "rt-seed-0001")
        h.clock.advance(by: 61)
        h.transport.hold()
        h.transport.enqueue(.success(tokenResponse("at-2", refreshToken: "rt-rotated-3")))
        let callers = (0..<5).map { _ in Task { try await h.token() } }
        await h.transport.arrivals.wait(for: 2)
        #expect(Harness.form(h.transport.tokenRequests[1])["refresh_token"] == "rt-rotated-2")
        for caller in callers { caller.cancel() }
        for caller in callers {
            await #expect(throws: CancellationError.self) { try await caller.value }
        }
        h.transport.release()
        await h.store.saves.wait(for: 2)
        #expect(h.store.entry(h.key)?.refreshToken == "rt-rotated-3")
        #expect(try await h.token().accessToken == "at-2")
        #expect(h.transport.tokenRequests.count == 2)
    }

    @Test func preCancelledCallNeverAcquires() async throws {
        let h = try await Harness(transport: .counting())
        let call = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await h.token()
        }
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(h.transport.requests.isEmpty)
        #expect(h.store.loads.count == 0)
    }

    @Test func callerWhoseDeadlinePassesTimesOutAloneAtOnce() async throws {
        let h = try await Harness(transport: .counting())
        h.transport.hold()
        let deadline = h.clock.now.addingTimeInterval(5)
        let hasty = Task { try await h.token(deadline: deadline) }
        let patient = Task { try await h.token() }
        await h.transport.arrivals.wait(for: 1)
        await waitUntil { await h.manager.waiterCount(h.key) == 2 }
        await h.clock.sleepersRegistered.wait(for: 1)
        h.clock.advance(by: 6)
        await #expect(throws: AuthError.timeout) { try await hasty.value }
        h.transport.release()
        #expect(try await patient.value.accessToken == "at-1")
    }

    @Test func aSentRefreshOutlivesItsTimedOutCallerAndIsCommitted() async throws {
        let configuration = refreshConfiguration()
        let h = try await Harness(configuration: configuration)
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-rotated-2")),
            .success(tokenResponse("at-2", expiresIn: 60, refreshToken: "rt-rotated-3")),
            .success(tokenResponse("at-3", expiresIn: 60, refreshToken: "rt-rotated-4")))
        _ = try await h.token()
        h.clock.advance(by: 61)
        h.transport.hold()
        let deadline = h.clock.now.addingTimeInterval(0.05)
        let hasty = Task { try await h.token(deadline: deadline) }
        await h.transport.arrivals.wait(for: 2)
        await h.clock.sleepersRegistered.wait(for: 1)
        // The transfer is bounded by the acquisition timeout, not by the caller's 50 ms.
        let sent = try #require(h.transport.tokenRequests.last)
        #expect((sent.timeout ?? .zero) >= configuration.acquisitionTimeout - .seconds(1))
        h.clock.advance(by: 1)
        await #expect(throws: AuthError.timeout) { try await hasty.value }
        // Every caller left, but the request was sent: it completes and its rotation is committed.
        h.transport.release()
        await h.store.saves.wait(for: 2)
        #expect(h.store.entry(h.key)?.refreshToken == "rt-rotated-3")
        #expect(try await h.token().accessToken == "at-2")
        h.clock.advance(by: 61)
        #expect(try await h.token().accessToken == "at-3")
        #expect(Harness.form(h.transport.tokenRequests[2])["refresh_token"] == "rt-rotated-3")
    }

    @Test func lastCallerTimingOutBeforeSendingCancelsTheAcquisition() async throws {
        let h = try await Harness()
        h.store.holdLoads()
        let deadline = h.clock.now.addingTimeInterval(1)
        let hasty = Task { try await h.token(deadline: deadline) }
        await h.store.loads.wait(for: 1)
        await h.clock.sleepersRegistered.wait(for: 1)
        h.clock.advance(by: 2)
        await #expect(throws: AuthError.timeout) { try await hasty.value }
        h.store.release()
        await h.manager.settleDetached()
        #expect(h.transport.requests.isEmpty)
    }

    @Test func rotatedRefreshTokenIsCommittedBeforeAnyCallerGetsTheAccessToken() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.transport.enqueue(.success(tokenResponse("at-1", refreshToken: "rt-rotated-2")))
        h.store.holdSaves()
        let caller = Task { try await h.token() }
        await h.store.savesStarted.wait(for: 1)
        await waitUntil { await h.manager.waiterCount(h.key) == 1 }
        #expect(h.store.entry(h.key) == nil)
        h.store.release()
        #expect(try await caller.value.accessToken == "at-1")
        #expect(h.store.entry(h.key)?.refreshToken == "rt-rotated-2")
    }

    @Test func responseWithoutRefreshTokenKeepsTheOldOne() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-rotated-2")),
            .success(tokenResponse("at-2", expiresIn: 60)),
            .success(tokenResponse("at-3", expiresIn: 60)))
        _ = try await h.token()
        h.clock.advance(by: 61)
        #expect(try await h.token().accessToken == "at-2")
        #expect(h.store.entry(h.key)?.refreshToken == "rt-rotated-2")
        h.clock.advance(by: 61)
        #expect(try await h.token().accessToken == "at-3")
        #expect(Harness.form(h.transport.tokenRequests[2])["refresh_token"] == "rt-rotated-2")
    }

    @Test(arguments: [(lifetime: 2, margin: 1.0), (lifetime: 3600, margin: 30.0)])
    func renewsInsideTheSmallerOfSkewAndHalfTheLifetime(lifetime: Int, margin: Double) async throws {
        let h = try await Harness(transport: .counting(expiresIn: lifetime))
        _ = try await h.token()
        h.clock.advance(by: Double(lifetime) - margin - 0.1)
        #expect(try await h.token().accessToken == "at-1")
        h.clock.advance(by: 0.1)
        #expect(try await h.token().accessToken == "at-2")
        #expect(h.transport.tokenRequests.count == 2)
    }

    @Test func tokenOfUnknownExpiryIsUsedUntilInvalidated() async throws {
        let h = try await Harness(transport: .counting(expiresIn: nil))
        let first = try await h.token()
        #expect(first.expiresAt == nil)
        h.clock.advance(by: 1_000_000)
        #expect(try await h.token().accessToken == "at-1")
        try await h.manager.invalidate(h.key, stamp: CredentialStamp(first.version))
        #expect(try await h.token().accessToken == "at-2")
    }

    @Test func fiftyConcurrentInvalidationsWithOneStaleStampCauseOneRenewal() async throws {
        let h = try await Harness(transport: .counting())
        let stale = try await h.token()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await h.manager.invalidate(h.key, stamp: CredentialStamp(stale.version))
                    return try await h.token().accessToken
                }
            }
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(Set(tokens) == ["at-2"])
        #expect(h.transport.tokenRequests.count == 2)
        #expect(await h.manager.status().first?.counters.recoveries == 1)
    }

    @Test func excessiveRenewalsArePausedUntilTheWindowPasses() async throws {
        let h = try await Harness(transport: .counting())
        let events = EventRecorder(h.manager)
        var token = try await h.token()
        for _ in 0..<5 {
            try await h.manager.invalidate(h.key, stamp: CredentialStamp(token.version))
            token = try await h.token()
        }
        #expect(h.transport.tokenRequests.count == 6)
        await #expect(throws: AuthError.excessiveRenewals) {
            try await h.manager.invalidate(h.key, stamp: CredentialStamp(token.version))
        }
        await #expect(throws: AuthError.excessiveRenewals) { try await h.token() }
        #expect(AuthError.excessiveRenewals.errorKind == .auth)
        await events.count.wait(for: 1)
        guard case .authFailed(let failure) = events.all.first else {
            Issue.record("no auth-failed event")
            return
        }
        #expect(failure.kind == .auth && failure.environment == "staging" && failure.profile == "service")
        h.clock.advance(by: 31)
        #expect(try await h.token().accessToken == "at-7")
        #expect(h.transport.tokenRequests.count == 7)
    }

    @Test func explicitInvalidationClearsTheExcessiveRenewalPause() async throws {
        let h = try await Harness(transport: .counting())
        var token = try await h.token()
        for _ in 0..<5 {
            try await h.manager.invalidate(h.key, stamp: CredentialStamp(token.version))
            token = try await h.token()
        }
        await #expect(throws: AuthError.excessiveRenewals) {
            try await h.manager.invalidate(h.key, stamp: CredentialStamp(token.version))
        }
        #expect(await h.manager.invalidate(environment: "staging", profile: "service") == 1)
        #expect(try await h.token().accessToken == "at-7")
    }

    @Test func invalidationKeepsRefreshStateAndCountsSessions() async throws {
        let h = try await Harness(configuration: refreshConfiguration(), transport: .counting(refreshToken: true))
        _ = try await h.token()
        #expect(await h.manager.invalidate(environment: "other") == 0)
        #expect(await h.manager.invalidate() == 1)
        #expect(await h.manager.status().first?.state == .expired)
        #expect(try await h.token().accessToken == "at-2")
        #expect(Harness.form(h.transport.tokenRequests[1])["refresh_token"] == "rt-1")
    }

    /// The call after `close` used to fail `cancelled`; it now says `shutting_down` (issue 12).
    @Test func closeWaitsForAPendingCommitAndLaterCallsAreShuttingDown() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.transport.enqueue(.success(tokenResponse("at-1", refreshToken: "rt-rotated-2")))
        h.transport.hold()
        let caller = Task { try await h.token() }
        await h.transport.arrivals.wait(for: 1)
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        let closed = Task { await h.manager.close() }
        h.transport.release()
        await closed.value
        #expect(h.store.entry(h.key)?.refreshToken == "rt-rotated-2")
        await #expect(throws: AuthError.shuttingDown) { try await h.token() }
    }

    /// The waiter used to get `cancelled`; a logout now answers it `logged_out` (SPEC §7, issue 12).
    @Test func logoutDuringAFlightCommitsNothingAndAnswersItsWaiterLoggedOut() async throws {
        let h = try await Harness(configuration: refreshConfiguration(), transport: .counting(refreshToken: true))
        h.transport.hold()
        let caller = Task { try await h.token() }
        await h.transport.arrivals.wait(for: 1)
        #expect(try await h.manager.logout() == 1)
        h.transport.release()
        // Kind `logged_out` (was `cancelled`: the caller did not cancel anything; SPEC §4.4).
        await #expect(throws: AuthError.loggedOut) { try await caller.value }
        #expect(h.store.entry(h.key) == nil)
        #expect(await h.manager.status().first?.state == SessionStatus.State.none)
    }

    @Test func removedSessionsAnswerTheirWaitersAndSendNothing() async throws {
        let h = try await Harness(transport: .counting())
        h.store.holdLoads()
        let caller = Task { try await h.token() }
        await waitUntil { await h.manager.waiterCount(h.key) == 1 }
        #expect(await h.manager.removeSessions(except: []) == 1)
        await #expect(throws: AuthError.cancelled) { try await caller.value }
        h.store.release()
        await h.manager.settleDetached()
        #expect(h.transport.requests.isEmpty)
        await #expect(throws: AuthError.self) { try await h.token() }
    }
}
