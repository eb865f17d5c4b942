import Foundation
import Synchronization
import TestSupport
import Testing
import TokenRelayErrorKinds
import TokenRelayHTTP

@testable import TokenRelayAuth

#if canImport(Glibc)
    import Glibc
#endif

/// Interactive logins against a scripted token endpoint (FakeTransport), with the real loopback
/// listener: what the real server cannot produce (slow_down, expired_token, a code delivered twice).
@Suite struct LoginTests {
    static let authorizationURL = "https://as.example/authorize"

    static func browserConfiguration(ports: [Int] = [0]) -> OAuthClientConfiguration {
        OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "cli", clientAuth: .none, scopes: ["read"],
            grant: .interactive(
                InteractiveLogin(
                    flow: .authorizationCode(ports: ports, path: "/callback"), authorizationURL: authorizationURL,
                    timeout: .seconds(60), authorizationParameters: [("prompt", "login")],
                    tokenParameters: [("extra", "1")])))
    }

    static func deviceConfiguration() -> OAuthClientConfiguration {
        OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "tv", clientAuth: .none, scopes: ["read"],
            grant: .interactive(
                InteractiveLogin(flow: .deviceCode, deviceAuthorizationURL: "https://as.example/device")))
    }

    static func deviceAuthorization(expiresIn: Int = 600, interval: Int = 1) -> HTTPResponse {
        json(
            #"{"device_code":"dc-secret-1","user_code":"ABCD-EFGH","verification_uri":"https://as.example/device","#
                + #""expires_in":\#(expiresIn),"interval":\#(interval)}"#)
    }

    /// The prompts the manager emits, in order.
    final class Prompts: Sendable {
        let stream: AsyncStream<AuthEvent>
        init(_ manager: TokenManager) { stream = manager.events }
        func next() async -> LoginPrompt? {
            for await event in stream {
                if case .prompt(let prompt) = event { return prompt }
            }
            return nil
        }
    }

    static func query(_ url: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in URLComponents(string: url)?.queryItems ?? [] { result[item.name] = item.value ?? "" }
        return result
    }

    static func form(_ request: HTTPRequest) -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in FormEncoding.decode(String(decoding: request.body ?? [], as: UTF8.self)) {
            result[name] = value
        }
        return result
    }

    // MARK: - Authorization code

    @Test func theCodeIsExchangedOnceWithTheSameRedirectURIAndTheVerifier() async throws {
        let transport = FakeTransport { _ in .success(tokenResponse("at-login", refreshToken: "rt-login")) }
        let manager = TokenManager(transport: transport)
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        let login = Task { try await manager.login(key) }
        let prompt = try #require(await prompts.next())
        #expect(prompt.kind == .browser)
        let parameters = Self.query(prompt.url.value)
        #expect(prompt.url.value.hasPrefix(Self.authorizationURL + "?"))
        #expect(parameters["response_type"] == "code")
        #expect(parameters["code_challenge_method"] == "S256")
        #expect(parameters["prompt"] == "login")
        #expect(parameters["nonce"] == nil, "no nonce without openid")
        let redirectURI = try #require(parameters["redirect_uri"])
        #expect(redirectURI.hasPrefix("http://127.0.0.1:") && redirectURI.hasSuffix("/callback"))
        let state = try #require(parameters["state"])

        let page = try await LoopbackHTTP.get("\(redirectURI)?code=code-1&state=\(state)")
        #expect(page.status == 200)
        #expect(page.body.contains("Login succeeded"))
        let result = try await login.value
        #expect(result.identity == nil)

        let posts = transport.tokenRequests
        #expect(posts.count == 1)
        let sent = Self.form(try #require(posts.first))
        #expect(sent["grant_type"] == "authorization_code")
        #expect(sent["code"] == "code-1")
        #expect(sent["redirect_uri"] == redirectURI)
        #expect(sent["client_id"] == "cli")
        #expect(sent["client_secret"] == nil, "a public client sends no secret")
        #expect(sent["extra"] == "1", "token parameters are sent")
        let verifier = try #require(sent["code_verifier"])
        #expect(Base64URL.encode(LibCrypto.sha256(Array(verifier.utf8))) == parameters["code_challenge"])
        #expect(try await manager.token(for: key).accessToken == "at-login")
    }

    @Test func aCodeDeliveredTwiceIsNeverSentTwice() async throws {
        let transport = FakeTransport { _ in .success(tokenResponse("at-1", refreshToken: "rt-1")) }
        let manager = TokenManager(transport: transport)
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        for attempt in 0..<2 {
            let login = Task { try await manager.login(key) }
            let prompt = try #require(await prompts.next())
            let parameters = Self.query(prompt.url.value)
            let target = "\(parameters["redirect_uri"] ?? "")?code=same-code&state=\(parameters["state"] ?? "")"
            let page = try await LoopbackHTTP.get(target)
            if attempt == 0 {
                _ = try await login.value
            } else {
                await #expect(throws: AuthError.self) { _ = try await login.value }
                #expect(page.body.contains("already exchanged"))
            }
        }
        #expect(transport.tokenRequests.count == 1)
    }

    @Test func wrongStateAndOtherPathsAreRefusedAndTheLoginGoesOn() async throws {
        let manager = TokenManager(transport: FakeTransport())
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        let login = Task { try await manager.login(key) }
        let prompt = try #require(await prompts.next())
        let parameters = Self.query(prompt.url.value)
        let redirectURI = try #require(parameters["redirect_uri"])
        let state = try #require(parameters["state"])
        let wrong = try await LoopbackHTTP.get("\(redirectURI)?code=c&state=not-\(state)")
        #expect(wrong.status == 400)
        let missing = try await LoopbackHTTP.get("\(redirectURI)?code=c")
        #expect(missing.status == 400)
        let elsewhere = try await LoopbackHTTP.get(redirectURI.replacingOccurrences(of: "/callback", with: "/x"))
        #expect(elsewhere.status == 404)
        let right = try await LoopbackHTTP.get("\(redirectURI)?code=c&state=\(state)")
        #expect(right.status == 200)
        _ = try await login.value
    }

    @Test func anErrorCallbackEndsTheLoginAndThePageEscapesWhatItEchoes() async throws {
        let transport = FakeTransport()
        let manager = TokenManager(transport: transport)
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        let login = Task { try await manager.login(key) }
        let prompt = try #require(await prompts.next())
        let parameters = Self.query(prompt.url.value)
        let description = "%3Cscript%3Ealert(1)%3C%2Fscript%3E%22%27"
        let page = try await LoopbackHTTP.get(
            "\(parameters["redirect_uri"] ?? "")?error=access_denied&error_description=\(description)&state=\(parameters["state"] ?? "")"
        )
        #expect(page.body.contains("access_denied"))
        #expect(!page.body.contains("<script>"))
        #expect(page.body.contains("&lt;script&gt;"))
        do {
            _ = try await login.value
            Issue.record("the login should fail")
        } catch let error as AuthError {
            #expect(error.errorKind == .auth)
            #expect(error.oauthError == "access_denied")
        }
        #expect(transport.tokenRequests.isEmpty)
    }

    @Test func concurrentLoginsJoinOnePrompt() async throws {
        let transport = FakeTransport()
        let manager = TokenManager(transport: transport)
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        let first = Task { try await manager.login(key) }
        let prompt = try #require(await prompts.next())
        let joiners = (0..<19).map { _ in Task { try await manager.login(key) } }
        // Every joiner is waiting before the browser arrives.
        while await manager.loginWaiterCount(key) < 20 { await Task.yield() }
        let parameters = Self.query(prompt.url.value)
        _ = try await LoopbackHTTP.get(
            "\(parameters["redirect_uri"] ?? "")?code=c&state=\(parameters["state"] ?? "")")
        _ = try await first.value
        for joiner in joiners { _ = try await joiner.value }
        #expect(transport.tokenRequests.count == 1)
    }

    @Test func cancellingTheLastCallerClosesTheListenerAndThreeFailuresHitTheLimit() async throws {
        let manager = TokenManager(transport: FakeTransport())
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        let prompts = Prompts(manager)
        for _ in 0..<TokenManager.loginFailureLimit {
            let login = Task { try await manager.login(key) }
            let prompt = try #require(await prompts.next())
            let redirectURI = try #require(Self.query(prompt.url.value)["redirect_uri"])
            login.cancel()
            await #expect(throws: CancellationError.self) { _ = try await login.value }
            await manager.settleDetached()
            await #expect(throws: LoopbackHTTP.Failure.self) { _ = try await LoopbackHTTP.get(redirectURI) }
        }
        await #expect(throws: AuthError.loginAttemptsExceeded) { _ = try await manager.login(key) }
    }

    @Test func aNonInteractiveCallerGetsLoginRequiredAtOnce() async throws {
        let transport = FakeTransport()
        let manager = TokenManager(transport: transport)
        let key = try await manager.register(
            environment: "e", profile: "me", configuration: Self.browserConfiguration())
        do {
            _ = try await manager.token(for: key)
            Issue.record("no token without a login")
        } catch let error as AuthError {
            #expect(error.errorKind == .interactionRequired)
            #expect(error.needsLogin)
        }
        #expect(transport.requests.isEmpty)
    }

    // MARK: - Device code

    @Test func slowDownAddsFiveSecondsAndPollingStopsAtSuccess() async throws {
        let transport = FakeTransport { _ in .success(tokenResponse("never")) }
        transport.enqueue(
            .success(Self.deviceAuthorization()), .success(oauthError("authorization_pending")),
            .success(oauthError("slow_down")), .success(oauthError("authorization_pending")),
            .success(tokenResponse("at-device", refreshToken: "rt-device")))
        let clock = FakeClock(autoAdvance: true)
        let manager = TokenManager(transport: transport, clock: clock)
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        let prompts = Prompts(manager)
        let result = try await manager.login(key)
        #expect(result.expiresAt != nil)
        let prompt = try #require(await prompts.next())
        #expect(prompt.kind == .device)
        #expect(prompt.userCode == "ABCD-EFGH")
        #expect(clock.sleeps == [1, 1, 6, 6])
        let polls = transport.tokenRequests.filter { Self.form($0)["grant_type"]?.hasSuffix("device_code") == true }
        #expect(polls.count == 4)
        #expect(Self.form(try #require(polls.first))["device_code"] == "dc-secret-1")
        #expect(try await manager.token(for: key).accessToken == "at-device")
    }

    @Test(arguments: [
        ("expired_token", "interaction_required", nil as String?), ("access_denied", "auth", "access_denied"),
    ])
    func aDeviceLoginEndsOnExpiryOrRefusal(error: String, kind: String, oauthError: String?) async throws {
        let transport = FakeTransport()
        transport.enqueue(
            .success(Self.deviceAuthorization()), .success(Auth_oauthError("authorization_pending")),
            .success(Auth_oauthError(error)))
        let failure = try await Self.failedDeviceLogin(transport)
        #expect(failure?.errorKind.rawValue == kind)
        #expect(failure?.oauthError == oauthError)
        #expect(transport.tokenRequests.count == 3)
    }

    /// The device authorization endpoint follows the token endpoint's rule (one translation of
    /// transport errors): a connection failure is tried again, a TLS failure is final (the next
    /// attempt would meet the same certificate), kind `transport` either way.
    @Test(arguments: [(HTTPError.tls("certificate has expired"), 1), (.transport("connection refused"), 5)])
    func aDeviceAuthorizationTransportFailureIsRetriedUnlessItIsFinal(error: HTTPError, attempts: Int) async throws {
        let transport = FakeTransport { _ in .failure(error) }
        let failure = try await Self.failedDeviceLogin(transport)
        #expect(failure?.errorKind == .transport, "\(String(describing: failure))")
        #expect(transport.requests.count == attempts)
    }

    /// A device login over `transport` (a clock that never waits), which must fail: its error
    /// (`nil`, with an issue recorded, when it succeeded).
    static func failedDeviceLogin(_ transport: FakeTransport) async throws -> AuthError? {
        let manager = TokenManager(transport: transport, clock: FakeClock(autoAdvance: true))
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        do {
            _ = try await manager.login(key)
            Issue.record("the login should fail")
            return nil
        } catch let failure as AuthError {
            return failure
        }
    }

    /// A login whose token request was already sent when the manager closes (SIGINT to
    /// `tokenrelay login` while the device code's poll is at the token endpoint) is finished and
    /// committed before `close` returns: `close` used to wait for renewals only, and the process
    /// then exited with the session never stored (issue 34, finding 2).
    @Test func closeWaitsForALoginWhoseTokenRequestWasSent() async throws {
        let transport = FakeTransport { _ in .success(tokenResponse("never")) }
        transport.enqueue(
            .success(Self.deviceAuthorization()), .success(tokenResponse("at-device", refreshToken: "rt-device")))
        let clock = FakeClock()
        let store = InMemoryTokenStore()
        let manager = TokenManager(transport: transport, store: store, clock: clock)
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        let login = Task { try await manager.login(key) }
        // The device authorization is answered; the first poll waits for its interval.
        await clock.sleepersRegistered.wait(for: 1)
        transport.hold()
        clock.advance(by: 1)
        await transport.arrivals.wait(for: 2)
        login.cancel()
        await #expect(throws: CancellationError.self) { _ = try await login.value }
        let closed = Task { await manager.close() }
        await waitUntil { await manager.closed }
        transport.release()
        await closed.value
        #expect(try await store.load(StoreKey(session: key))?.refreshToken == "rt-device")
    }

    @Test func pollingIsBoundedByExpiresIn() async throws {
        let transport = FakeTransport { _ in .success(oauthError("authorization_pending")) }
        transport.enqueue(.success(Self.deviceAuthorization(expiresIn: 10, interval: 4)))
        let manager = TokenManager(transport: transport, clock: FakeClock(autoAdvance: true))
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        await #expect(throws: AuthError.loginRequired("the device code expired before the login was approved")) {
            _ = try await manager.login(key)
        }
        #expect(transport.tokenRequests.count == 1 + 2)
    }

    // MARK: - Renewal

    @Test func aPersonsSessionWhoseRefreshTokenWentWhileItWaitedForTheLeaseAsksForALogin() async throws {
        // Another process logs the session out (its entry goes) between this process's first read
        // and its read under the lease: the person must log in again, and nothing is sent.
        let store = FakeStore()
        let registered = Mutex<SessionKey?>(nil)
        let transport = FakeTransport()
        let manager = TokenManager(
            transport: transport, store: store, clock: FakeClock(autoAdvance: true),
            afterLease: {
                if let key = registered.withLock({ $0 }) { try? await store.remove(StoreKey(session: key)) }
            })
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        registered.withLock { $0 = key }
        store.put(
            StoredTokens(accessToken: "at-expired", expiresAt: Date(timeIntervalSinceNow: -60), refreshToken: "rt-1"),
            for: key)
        await #expect(throws: AuthError.loginRequired("profile 'tv' needs a person to log in", scopes: ["read"])) {
            _ = try await manager.token(for: key)
        }
        #expect(transport.tokenRequests.isEmpty)
    }

    @Test func aRefusedRefreshEndsAnInteractiveSessionAndAsksForALogin() async throws {
        let transport = FakeTransport()
        transport.enqueue(
            .success(Self.deviceAuthorization()), .success(tokenResponse("at-1", expiresIn: 60, refreshToken: "rt-1")),
            .success(oauthError("invalid_grant")))
        let manager = TokenManager(transport: transport, clock: FakeClock(autoAdvance: true))
        let key = try await manager.register(environment: "e", profile: "tv", configuration: Self.deviceConfiguration())
        _ = try await manager.login(key)
        let events = manager.events
        await manager.invalidate(environment: "e", profile: "tv")
        await #expect(throws: AuthError.loginRequired("the refresh token was refused (invalid_grant)")) {
            _ = try await manager.token(for: key)
        }
        for await event in events {
            if case .authFailed(let failure) = event {
                #expect(failure.kind == .interactionRequired)
                break
            }
        }
        let status = await manager.status().first
        #expect(status?.state == .interactionRequired)
    }
}

/// The `oauthError` fixture under a name that does not clash with the test's parameter.
func Auth_oauthError(_ error: String) -> HTTPResponse { oauthError(error) }
