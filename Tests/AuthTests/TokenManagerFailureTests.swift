import Foundation
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

/// One malformed token endpoint answer.
struct MalformedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let response: HTTPResponse
    var testDescription: String { name }

    static let all: [MalformedCase] = [
        .init(name: "non-JSON", response: json("hello, not json")),
        .init(name: "array", response: json(#"[{"access_token":"x","token_type":"Bearer"}]"#)),
        .init(name: "string", response: json(#""access_token""#)),
        .init(name: "missing access_token", response: json(#"{"token_type":"Bearer","expires_in":60}"#)),
        .init(name: "empty access_token", response: json(#"{"access_token":"","token_type":"Bearer"}"#)),
        .init(name: "numeric access_token", response: json(#"{"access_token":12,"token_type":"Bearer"}"#)),
        .init(name: "access_token with a newline", response: json(#"{"access_token":"a\nb","token_type":"Bearer"}"#)),
        .init(name: "missing token_type", response: json(#"{"access_token":"tok-abc"}"#)),
        .init(name: "token_type mac", response: json(#"{"access_token":"tok-abc","token_type":"mac"}"#)),
        .init(
            name: "expires_in -1", response: json(#"{"access_token":"tok-abc","token_type":"Bearer","expires_in":-1}"#)),
        .init(
            name: "expires_in 0", response: json(#"{"access_token":"tok-abc","token_type":"Bearer","expires_in":0}"#)),
        .init(
            name: "expires_in abc",
            response: json(#"{"access_token":"tok-abc","token_type":"Bearer","expires_in":"abc"}"#)),
        .init(
            name: "expires_in 1.5",
            response: json(#"{"access_token":"tok-abc","token_type":"Bearer","expires_in":1.5}"#)),
        .init(
            name: "expires_in true",
            response: json(#"{"access_token":"tok-abc","token_type":"Bearer","expires_in":true}"#)),
        .init(
            name: "refresh_token number",
            response: json(#"{"access_token":"tok-abc","token_type":"Bearer","refresh_token":5}"#)),
        .init(name: "scope list", response: json(#"{"access_token":"tok-abc","token_type":"Bearer","scope":["a"]}"#)),
        .init(name: "200 with error body", response: json(#"{"error":"invalid_request"}"#)),
        .init(
            name: "302 redirect",
            response: HTTPResponse(status: 302, headers: HTTPHeaders([("Location", "https://evil.example/token")]))),
        .init(
            name: "401 Basic challenge without body",
            response: HTTPResponse(status: 401, headers: HTTPHeaders([("WWW-Authenticate", "Basic realm=\"as\"")]))),
        .init(name: "404 html", response: HTTPResponse(status: 404, body: Array("<html>nope</html>".utf8))),
    ]
}

@Suite(.timeLimit(.minutes(5)))
struct TokenManagerFailureTests {
    @Test(arguments: MalformedCase.all)
    func malformedTokenResponsesAreRejectedWithKindAuth(_ malformed: MalformedCase) async throws {
        let h = try await Harness()
        h.transport.enqueue(.success(malformed.response))
        do {
            _ = try await h.token()
            Issue.record("accepted \(malformed.name)")
        } catch let error as AuthError {
            #expect(error.errorKind == .auth)
            #expect(!error.description.contains("tok-abc"))
            #expect(!error.description.contains("nope"))
        }
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test(arguments: [
        (#""expires_in":"60""#, 60.0), (#""expires_in":60.0"#, 60.0), (#""expires_in":60"#, 60.0),
    ])
    func acceptedExpiresInForms(member: String, seconds: Double) async throws {
        let h = try await Harness()
        h.transport.enqueue(
            .success(json(#"{"access_token":"tok-ok","token_type":"bEaReR",\#(member),"extra":{"x":1}}"#)))
        let token = try await h.token()
        #expect(token.expiresAt == h.clock.now.addingTimeInterval(seconds))
        #expect(token.tokenType == "bEaReR")
    }

    @Test func invalidGrantOnRefreshMakesAClientCredentialsSessionAcquireAfresh() async throws {
        let h = try await Harness()
        let events = EventRecorder(h.manager)
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-cc-1")),
            .success(oauthError("invalid_grant")),
            .success(tokenResponse("at-2", expiresIn: 60)))
        _ = try await h.token()
        h.clock.advance(by: 61)
        #expect(try await h.token().accessToken == "at-2")
        let grants = h.transport.tokenRequests.map { Harness.form($0)["grant_type"] }
        #expect(grants == ["client_credentials", "refresh_token", "client_credentials"])
        #expect(h.store.entry(h.key)?.refreshToken == nil)
        await h.manager.close()
        await events.finished.wait()
        #expect(events.all.isEmpty)
    }

    @Test func invalidGrantOnRefreshEndsARefreshTokenSessionWithInteractionRequired() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        let events = EventRecorder(h.manager)
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-rotated-2")),
            .success(oauthError("invalid_grant", description: "refresh token revoked")))
        _ = try await h.token()
        h.clock.advance(by: 61)
        do {
            _ = try await h.token()
            Issue.record("renewal should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .interactionRequired)
        }
        await events.count.wait(for: 1)
        guard case .authFailed(let failure) = events.all.first else {
            Issue.record("no auth-failed")
            return
        }
        #expect(failure.kind == .interactionRequired)
        #expect(h.store.entry(h.key) == nil)
        // Ended: no further requests are sent.
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.transport.tokenRequests.count == 2)
        let status = try #require(await h.manager.status().first)
        #expect(status.state == .interactionRequired)
        #expect(status.refreshable == false)
        #expect(status.lastError?.kind == .interactionRequired)
        // logout clears it, but the configured seed was already sent once: it is never sent again.
        #expect(try await h.manager.logout(environment: "staging") == 1)
        await #expect(
            throws: AuthError.interactionRequired("the configured refresh token was already used; provision a new one")
        ) {
            try await h.token()
        }
        #expect(h.transport.tokenRequests.count == 2)
    }

    @Test func afterLogoutTheSpentSeedIsNeverReplayedButANewSeedIsUsed() async throws {
        let h = try await Harness(configuration: refreshConfiguration(seed: "rt-seed-0001"))
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-rotated-2")),
            .success(tokenResponse("at-2", expiresIn: 60, refreshToken: "rt-rotated-3")))
        #expect(try await h.token().accessToken == "at-1")
        #expect(try await h.manager.logout() == 1)
        do {
            _ = try await h.token()
            Issue.record("a spent seed must not be sent")
        } catch let error as AuthError {
            #expect(error.errorKind == .interactionRequired)
            #expect(error.description.contains("already used"))
            #expect(!error.description.contains("rt-seed-0001"))
        }
        #expect(h.transport.tokenRequests.count == 1)
        // The user provisions a new seed (same session key): it is used normally.
        _ = try await h.manager.register(
            environment: "staging", profile: "service", configuration: refreshConfiguration(seed: "rt-seed-0002"))
        #expect(try await h.token().accessToken == "at-2")
        #expect(h.transport.tokenRequests.count == 2)
        #expect(Harness.form(h.transport.tokenRequests[1])["refresh_token"] == "rt-seed-0002")
    }

    @Test func aSeedAbandonedBeforeSendingIsNotConsumed() async throws {
        let h = try await Harness(configuration: refreshConfiguration())
        h.store.holdLoads()
        let deadline = h.clock.now.addingTimeInterval(1)
        let hasty = Task { try await h.token(deadline: deadline) }
        await h.store.loads.wait(for: 1)
        await h.clock.sleepersRegistered.wait(for: 1)
        h.clock.advance(by: 2)
        await #expect(throws: AuthError.timeout) { try await hasty.value }
        h.store.release()
        await h.manager.settleDetached()
        #expect(h.transport.tokenRequests.isEmpty)
        #expect(try await h.token().accessToken == "at-1")
        #expect(Harness.form(h.transport.tokenRequests[0])["refresh_token"] == "rt-seed-0001")
    }

    @Test func invalidClientOnFirstAcquisitionIsAnAuthErrorWithoutAuthFailed() async throws {
        let h = try await Harness()
        let events = EventRecorder(h.manager)
        h.transport.enqueue(
            .success(oauthError("invalid_client", status: 401, description: "bad client \(clientSecretCanary)")))
        do {
            _ = try await h.token()
            Issue.record("should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .auth)
            #expect(error.oauthError == "invalid_client")
            #expect(error.oauthErrorDescription?.contains("bad client") == true)
            #expect(error.oauthErrorDescription?.contains(clientSecretCanary) == false)
            #expect(!error.description.contains(clientSecretCanary))
        }
        #expect(h.transport.tokenRequests.count == 1)
        let status = try #require(await h.manager.status().first)
        #expect(status.state == .failed)
        // Nothing was renewed, so no auth-failed: prove it by closing the stream and draining it.
        await h.manager.close()
        await events.finished.wait()
        #expect(events.all.isEmpty)
    }

    @Test func refusedRenewalEmitsAuthFailedWithOAuthError() async throws {
        let h = try await Harness()
        let events = EventRecorder(h.manager)
        h.transport.enqueue(
            .success(tokenResponse("at-1", expiresIn: 60)), .success(oauthError("invalid_client", status: 401)))
        _ = try await h.token()
        h.clock.advance(by: 61)
        await #expect(throws: AuthError.oauth(error: "invalid_client", description: nil, status: 401)) {
            try await h.token()
        }
        await events.count.wait(for: 1)
        guard case .authFailed(let failure) = events.all.first else {
            Issue.record("no auth-failed")
            return
        }
        #expect(failure.oauthError == "invalid_client")
        #expect(failure.kind == .auth)
    }

    @Test func serverErrorsAreRetriedWithBackoffThenSucceed() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.success(HTTPResponse(status: 503)), .success(oauthError("server_error", status: 500)))
        #expect(try await h.token().accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 3)
        // 250 ms then 500 ms, each shortened by the injected jitter (0.5 -> 25 %).
        #expect(h.clock.sleeps == [0.1875, 0.375])
    }

    @Test func aTLSFailureAtTheTokenEndpointIsFinalAndTriedOnce() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.failure(.tls("SSL certificate problem: unable to get local issuer certificate")))
        do {
            _ = try await h.token()
            Issue.record("a certificate failure must fail the acquisition")
        } catch let error as AuthError {
            #expect(error.errorKind == .transport)
        }
        #expect(h.transport.tokenRequests.count == 1)
        #expect(h.clock.sleeps.isEmpty)
    }

    @Test func eachEnvironmentsTokenTrafficGoesThroughItsOwnTransport() async throws {
        let shared = FakeTransport()
        let staging = FakeTransport()
        let manager = TokenManager(
            transport: shared, environmentTransports: ["staging": staging], clock: FakeClock(), random: { 0.5 })
        let configuration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "svc", clientSecret: .value(clientSecretCanary))
        let inStaging = try await manager.register(environment: "staging", profile: "p", configuration: configuration)
        let elsewhere = try await manager.register(environment: "other", profile: "p", configuration: configuration)
        _ = try await manager.token(for: inStaging)
        #expect(staging.tokenRequests.count == 1 && shared.tokenRequests.isEmpty)
        _ = try await manager.token(for: elsewhere)
        #expect(staging.tokenRequests.count == 1 && shared.tokenRequests.count == 1)
    }

    @Test func temporarilyUnavailableIsRetried() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.success(oauthError("temporarily_unavailable")))
        #expect(try await h.token().accessToken == "at-1")
        #expect(h.transport.tokenRequests.count == 2)
    }

    @Test func tooManyRequestsHonoursRetryAfter() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.success(json("{}", status: 429, headers: [("Retry-After", "7")])))
        #expect(try await h.token().accessToken == "at-1")
        #expect(h.clock.sleeps == [7])
    }

    @Test func retryAfterBeyondTheDeadlineFailsAtOnce() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.success(json("{}", status: 429, headers: [("Retry-After", "120")])))
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.clock.sleeps.isEmpty)
        #expect(h.transport.tokenRequests.count == 1)
    }

    @Test func transportErrorsAreRetriedThenFailWithKindTransportWithinTheDeadline() async throws {
        let transport = FakeTransport { _ in .failure(.transport("connection refused")) }
        let configuration = OAuthClientConfiguration(
            tokenURL: "http://127.0.0.1:9/token", clientID: "svc", clientSecret: .value(clientSecretCanary),
            acquisitionTimeout: .seconds(3))
        let h = try await Harness(
            configuration: configuration, transport: transport, clock: FakeClock(autoAdvance: true),
            retryPolicy: RetryPolicy(maximumAttempts: 100))
        let start = h.clock.now
        do {
            _ = try await h.token()
            Issue.record("should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .transport)
        }
        #expect(h.transport.tokenRequests.count > 2)
        #expect(h.clock.now.timeIntervalSince(start) < 3)
        #expect(await h.manager.status().first?.lastError?.kind == .transport)
    }

    @Test func nonTransientErrorsAreNotRetried() async throws {
        let h = try await Harness(clock: FakeClock(autoAdvance: true))
        h.transport.enqueue(.success(oauthError("invalid_scope")))
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.transport.tokenRequests.count == 1)
    }

    /// Issue 34, finding 3: a failed commit is a `store` failure (not `internal`); the rotated
    /// refresh token is kept and its commit tried again on the next use, before anything is sent.
    @Test func storeFailureIsARenewalFailureAndItsCommitIsRetriedOnTheNextUse() async throws {
        let h = try await Harness(configuration: refreshConfiguration(), transport: .counting(refreshToken: true))
        h.store.failSaves(true)
        do {
            _ = try await h.token()
            Issue.record("should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .store)
        }
        h.store.failSaves(false)
        #expect(try await h.token().accessToken == "at-1")
        // Committed now, without another token request.
        #expect(h.transport.tokenRequests.count == 1)
        #expect(h.store.entry(h.key)?.refreshToken == "rt-1")
    }

    /// Issue 34, finding 3: a rotated refresh token whose commit failed is committed at close (a
    /// clean exit never drops it).
    @Test func anUnsavedRotationIsCommittedAtClose() async throws {
        let h = try await Harness(configuration: refreshConfiguration(), transport: .counting(refreshToken: true))
        h.store.failSaves(true)
        await #expect(throws: AuthError.self) { try await h.token() }
        #expect(h.store.entry(h.key) == nil)
        h.store.failSaves(false)
        await h.manager.close()
        #expect(h.store.entry(h.key)?.refreshToken == "rt-1")
        #expect(h.transport.tokenRequests.count == 1)
    }

    /// A manager whose store already holds a session: access token `at-stored` valid for 600 s,
    /// refresh token `rt-stored`.
    func harnessWithAStoredSession(revision: Int64 = 0) async throws -> (Harness, FakeStore, SessionKey) {
        let store = FakeStore()
        let configuration = refreshConfiguration()
        let key = SessionKey(environment: "staging", profile: "service", configuration: configuration)
        let clock = FakeClock()
        store.put(
            StoredTokens(
                accessToken: "at-stored", receivedAt: clock.now, expiresAt: clock.now.addingTimeInterval(600),
                refreshToken: "rt-stored", revision: revision),
            for: key)
        let h = try await Harness(
            configuration: configuration, transport: .counting(refreshToken: true), clock: clock, store: store)
        return (h, store, key)
    }

    @Test func aRenewalWhoseSaveFailedKeepsItsRotatedRefreshTokenOverTheSpentOneInTheStore() async throws {
        let (h, store, key) = try await harnessWithAStoredSession(revision: 1)
        #expect(try await h.token().accessToken == "at-stored")
        #expect(await h.manager.invalidate() == 1)
        h.store.failSaves(true)
        await #expect(throws: AuthError.self) { try await h.token() }
        h.store.failSaves(false)
        // The store still holds the spent rt-stored (the server rotated it to rt-1): re-reading it
        // under the lease must not bring it back. The failed commit is made now (issue 34), and
        // its access token serves: nothing more is sent.
        #expect(try await h.token().accessToken == "at-1")
        let sent = h.transport.tokenRequests.map { Harness.form($0)["refresh_token"] }
        #expect(sent == ["rt-stored"])
        #expect(store.entry(key)?.refreshToken == "rt-1")
    }

    @Test func storedTokensAreUsedWithoutARequest() async throws {
        let (h, _, _) = try await harnessWithAStoredSession()
        #expect(try await h.token().accessToken == "at-stored")
        #expect(h.transport.requests.isEmpty)
        h.clock.advance(by: 600)
        #expect(try await h.token().accessToken == "at-1")
        #expect(Harness.form(h.transport.tokenRequests[0])["refresh_token"] == "rt-stored")
    }
}
