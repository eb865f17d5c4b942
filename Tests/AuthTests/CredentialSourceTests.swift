import Foundation
import Synchronization
import Testing
import TokenRelayHTTP
import TokenRelayLogging

@testable import TokenRelayAuth

@Suite(.timeLimit(.minutes(5)))
struct CredentialSourceTests {
    @Test func tokenSourceSetsBearerAndStampsTheVersion() async throws {
        let h = try await Harness(transport: .counting())
        let source = TokenCredentialSource(manager: h.manager, key: h.key, clock: h.clock)
        var request = HTTPRequest(url: "https://api.example/x")
        let stamp = try await source.apply(to: &request)
        #expect(request.headers["Authorization"] == "Bearer at-1")
        #expect(source.isRenewable)
        try await source.invalidate(stamp: stamp)
        var again = HTTPRequest(url: "https://api.example/x")
        let newer = try await source.apply(to: &again)
        #expect(again.headers["Authorization"] == "Bearer at-2")
        #expect(newer != stamp)
        // A stale stamp changes nothing.
        try await source.invalidate(stamp: stamp)
        var third = HTTPRequest(url: "https://api.example/x")
        _ = try await source.apply(to: &third)
        #expect(third.headers["Authorization"] == "Bearer at-2")
    }

    @Test func tokenSourceHonoursCancellation() async throws {
        let h = try await Harness(transport: .counting())
        let source = TokenCredentialSource(manager: h.manager, key: h.key, clock: h.clock)
        let call = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var request = HTTPRequest(url: "https://api.example/x")
            return try await source.apply(to: &request)
        }
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(h.transport.requests.isEmpty)
    }

    @Test func apiKeyGoesInTheHeaderOrTheQuery() async throws {
        let header = StaticCredentialSource(.apiKey(.header("X-API-Key"), .value("key-1234")))
        var request = HTTPRequest(url: "https://api.example/x")
        _ = try await header.apply(to: &request)
        #expect(request.headers["X-API-Key"] == "key-1234")
        #expect(!header.isRenewable)

        let query = StaticCredentialSource(.apiKey(.query("api key"), .value("k&y=1 2")))
        for (url, expected) in [
            ("https://api.example/x", "https://api.example/x?api%20key=k%26y%3D1%202"),
            ("https://api.example/x?a=1", "https://api.example/x?a=1&api%20key=k%26y%3D1%202"),
            ("https://api.example/x?a=1#frag", "https://api.example/x?a=1&api%20key=k%26y%3D1%202#frag"),
        ] {
            var request = HTTPRequest(url: url)
            _ = try await query.apply(to: &request)
            #expect(request.url == expected)
        }
    }

    @Test func basicEncodesUserAndPassword() async throws {
        let source = StaticCredentialSource(.basic(username: "user", password: .value("pa:ss word")))
        var request = HTTPRequest(url: "https://api.example/x")
        _ = try await source.apply(to: &request)
        #expect(request.headers["Authorization"] == "Basic " + Data("user:pa:ss word".utf8).base64EncodedString())
    }

    @Test func staticBearerIsResolvedOnce() async throws {
        let calls = Atomic<Int>(0)
        let source = StaticCredentialSource(
            .bearer(
                SecretProvider {
                    calls.add(1, ordering: .relaxed)
                    return "static-bearer-1"
                }))
        for _ in 0..<3 {
            var request = HTTPRequest(url: "https://api.example/x")
            _ = try await source.apply(to: &request)
            #expect(request.headers["Authorization"] == "Bearer static-bearer-1")
        }
        #expect(calls.load(ordering: .relaxed) == 1)
    }

    @Test func fetchedBearerIsCachedAndFetchedAgainAfterInvalidationOrExpiry() async throws {
        let calls = Atomic<Int>(0)
        let clock = FakeClock()
        let source = FetchedBearerCredentialSource(
            fetcher: SecretProvider { "fetched-\(calls.add(1, ordering: .relaxed).newValue)" },
            cacheDuration: .seconds(300),
            clock: clock)
        func apply() async throws -> (String?, CredentialStamp) {
            var request = HTTPRequest(url: "https://api.example/x")
            let stamp = try await source.apply(to: &request)
            return (request.headers["Authorization"], stamp)
        }
        let (first, stamp) = try await apply()
        #expect(first == "Bearer fetched-1")
        #expect(try await apply().0 == "Bearer fetched-1")
        try await source.invalidate(stamp: stamp)
        #expect(try await apply().0 == "Bearer fetched-2")
        try await source.invalidate(stamp: stamp)  // stale: no effect
        #expect(try await apply().0 == "Bearer fetched-2")
        clock.advance(by: 301)
        #expect(try await apply().0 == "Bearer fetched-3")
        #expect(source.isRenewable)
    }

    @Test func noSecretOrTokenReachesAnyDescription() async throws {
        let canaryToken = "at-canary-91c3"
        let canaryRefresh = "rt-canary-77d0"
        let h = try await Harness()
        h.transport.enqueue(
            .success(tokenResponse(canaryToken, expiresIn: 60, refreshToken: canaryRefresh)),
            .success(
                oauthError(
                    "invalid_client", status: 401,
                    description: "secret \(clientSecretCanary) and \(canaryRefresh) are wrong")))
        let token = try await h.token()
        h.clock.advance(by: 61)
        var texts: [String] = [token.description, "\(token)", String(describing: h.store.entry(h.key))]
        do {
            _ = try await h.token()
        } catch let error as AuthError {
            texts += [error.description, "\(error)", error.oauthErrorDescription ?? ""]
        }
        let status = try #require(await h.manager.status().first)
        texts.append(status.lastError?.message ?? "")
        let errors: [AuthError] = [
            .oauth(error: ServerText(canaryToken), description: ServerText(clientSecretCanary), status: 400),
            .invalidTokenResponse(canaryToken),
            .transport(canaryRefresh), .configuration(clientSecretCanary), .secretUnavailable(clientSecretCanary),
            .discovery(canaryToken),
        ]
        texts += errors.map(\.description)
        texts += errors.compactMap(\.oauthErrorDescription)
        texts += errors.compactMap(\.oauthError)
        for text in texts {
            for canary in [canaryToken, canaryRefresh, clientSecretCanary] {
                #expect(!text.contains(canary), "leaked in: \(text)")
            }
        }
    }
}
