import Synchronization
import Testing

@testable import TokenRelayAuth
@testable import TokenRelayHTTP

/// ``CredentialsMiddleware``: where credentials go, when a 401 is replayed, and the recovery budget a
/// subscription shares across its connections.
@Suite struct CredentialsMiddlewareTests {
    static let policy = OriginPolicy(baseURL: "https://api.example.com/v1", allowed: ["https://files.example.com:8443"])
    static let invalidToken = HTTPResponse(
        status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Bearer realm="api", error="invalid_token""#)]))

    @Test func credentialsAreWithheldFromOtherOrigins() async throws {
        let transport = ScriptedTransport()
        let client = HTTPClient(
            transport: transport,
            middlewares: [CredentialsMiddleware(source: VersionedCredential(), origins: Self.policy)])
        _ = try await client.send(collecting: HTTPRequest(url: "https://api.example.com/v1/items"))
        _ = try await client.send(collecting: HTTPRequest(url: "https://api.example.com:444/v1/items"))
        #expect(transport.requests[0].headers["Authorization"] == "Bearer token-1")
        #expect(transport.requests[1].headers["Authorization"] == nil)
    }

    @Test(arguments: ["GET", "HEAD", "OPTIONS"])
    func invalidTokenOnASafeBodylessRequestIsReplayedOnceWithANewToken(method: String) async throws {
        let transport = ScriptedTransport([Self.invalidToken, HTTPResponse(status: 200)])
        let source = VersionedCredential()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(
            collecting: HTTPRequest(method: method, url: "https://api.example.com/v1/items"))
        #expect(response.status == 200)
        #expect(transport.requests.map { $0.headers["Authorization"] } == ["Bearer token-1", "Bearer token-2"])
        #expect(source.invalidated == [CredentialStamp(1)])
    }

    @Test func aSecond401IsReturnedAsItIs() async throws {
        let transport = ScriptedTransport([Self.invalidToken])
        let source = VersionedCredential()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(collecting: HTTPRequest(url: "https://api.example.com/v1/items"))
        #expect(response.status == 401)
        #expect(transport.requests.count == 2)
        #expect(source.invalidated.count == 1)
    }

    /// A 401 `invalid_token` on a request that may not be sent again is returned as it is, but the
    /// credential it was signed with is invalidated all the same (SPEC §5.3: whatever the method),
    /// so the next request renews instead of sending a revoked token again (issue 34, finding 8).
    @Test(arguments: [
        HTTPRequest(method: "POST", url: "https://api.example.com/v1/items"),
        HTTPRequest(method: "POST", url: "https://api.example.com/v1/items", body: [1]),
        HTTPRequest(method: "DELETE", url: "https://api.example.com/v1/items/1"),
        HTTPRequest(url: "https://api.example.com/v1/items", body: [1]),
    ])
    func aRefusedTokenIsInvalidatedButAnUnsafeRequestIsNotReplayed(request: HTTPRequest) async throws {
        let transport = ScriptedTransport([Self.invalidToken, HTTPResponse(status: 200)])
        let source = VersionedCredential()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        #expect(try await client.send(collecting: request).status == 401)
        #expect(transport.requests.count == 1)
        #expect(source.invalidated == [CredentialStamp(1)])
        // The next request carries the renewed credential.
        #expect(try await client.send(collecting: request).status == 200)
        #expect(transport.requests.last?.headers["Authorization"] == "Bearer token-2")
    }

    static let notRecovered: [(String, HTTPRequest, HTTPResponse)] = [
        (
            "403", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(status: 403, headers: invalidToken.headers)
        ),
        (
            "insufficient_scope", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(
                status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Bearer error="insufficient_scope""#)]))
        ),
        (
            "Basic", HTTPRequest(url: "https://api.example.com/v1/items"),
            HTTPResponse(
                status: 401, headers: HTTPHeaders([("WWW-Authenticate", #"Basic realm="x", error="invalid_token""#)]))
        ),
        ("no challenge", HTTPRequest(url: "https://api.example.com/v1/items"), HTTPResponse(status: 401)),
    ]

    @Test(arguments: notRecovered)
    func otherFailuresAreNeverReplayed(label: String, request: HTTPRequest, answer: HTTPResponse) async throws {
        let transport = ScriptedTransport([answer])
        let source = VersionedCredential()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        let response = try await client.send(collecting: request)
        #expect(response.status == answer.status, "\(label)")
        #expect(transport.requests.count == 1, "\(label)")
        #expect(source.invalidated.isEmpty, "\(label)")
    }

    @Test func staticCredentialsAreNeverRenewed() async throws {
        let transport = ScriptedTransport([Self.invalidToken])
        let source = VersionedCredential(renewable: false)
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        #expect(try await client.send(collecting: HTTPRequest(url: "https://api.example.com/v1")).status == 401)
        #expect(transport.requests.count == 1)
        #expect(source.invalidated.isEmpty)
    }

    @Test func challengeInASecondFieldOrAfterAnotherSchemeIsFound() {
        let request = HTTPRequest(url: "https://api.example.com/v1")
        let twoFields = HTTPResponse(
            status: 401,
            headers: HTTPHeaders([
                ("WWW-Authenticate", "Basic realm=x"), ("www-authenticate", "bearer ERROR=invalid_token"),
            ]))
        let oneField = HTTPResponse(
            status: 401,
            headers: HTTPHeaders([("WWW-Authenticate", #"Newauth realm="apps", type=1, Bearer error="invalid_token""#)])
        )
        #expect(CredentialsMiddleware.isRecoverable(request: request, response: twoFields))
        #expect(CredentialsMiddleware.isRecoverable(request: request, response: oneField))
    }

    // MARK: The budget a subscription shares

    @Test func aSharedBudgetIsSpentByOneReplayAndRestoredByASuccessfulOpen() async throws {
        let transport = ScriptedTransport([
            Self.invalidToken, HTTPResponse(status: 200),  // connection 1: replayed, opens: budget restored
            Self.invalidToken, HTTPResponse(status: 503),  // connection 2: replayed, fails: budget stays spent
            Self.invalidToken,  // connection 3: no replay left
        ])
        let source = VersionedCredential()
        let budget = AuthRecoveryBudget()
        let client = HTTPClient(
            transport: transport,
            middlewares: [CredentialsMiddleware(source: source, origins: Self.policy, budget: budget)])
        let url = "https://api.example.com/v1/events"
        #expect(try await client.send(collecting: HTTPRequest(url: url)).status == 200)
        #expect(budget.isAvailable)
        #expect(try await client.send(collecting: HTTPRequest(url: url)).status == 503)
        #expect(!budget.isAvailable)
        #expect(try await client.send(collecting: HTTPRequest(url: url)).status == 401)
        #expect(transport.requests.count == 5)
        // Connection 3 is not replayed, but its refused credential is invalidated all the same.
        #expect(source.invalidated == [CredentialStamp(1), CredentialStamp(2), CredentialStamp(3)])
    }

    @Test func requestsWithoutASharedBudgetEachGetOneReplay() async throws {
        let transport = ScriptedTransport([Self.invalidToken, Self.invalidToken, Self.invalidToken, Self.invalidToken])
        let source = VersionedCredential()
        let client = HTTPClient(
            transport: transport, middlewares: [CredentialsMiddleware(source: source, origins: Self.policy)])
        for _ in 0..<2 {
            #expect(try await client.send(collecting: HTTPRequest(url: "https://api.example.com/v1/x")).status == 401)
        }
        #expect(transport.requests.count == 4)
        #expect(source.invalidated.count == 2)
    }

    @Test func theReplayIsReportedToTheRequestsObserver() async throws {
        let transport = ScriptedTransport([Self.invalidToken, HTTPResponse(status: 200)])
        let client = HTTPClient(
            transport: transport,
            middlewares: [CredentialsMiddleware(source: VersionedCredential(), origins: Self.policy)])
        let events = Mutex<[HTTPReplayEvent]>([])
        var request = HTTPRequest(url: "https://api.example.com/v1/x")
        request.replayObserver = { event in events.withLock { $0.append(event) } }
        _ = try await client.send(collecting: request)
        #expect(events.withLock { $0 } == [.answering(status: 401), .replaying(status: 401)])
    }

    @Test func budgetAllowsOneReplay() {
        let budget = AuthRecoveryBudget()
        let first = budget.consume()
        let second = budget.consume()
        #expect(first)
        #expect(!second)
        #expect(!budget.isAvailable)
    }

    @Test func successfulOpenRestoresTheReplay() {
        let budget = AuthRecoveryBudget()
        for _ in 0..<3 {  // many token lifetimes: 401, renewed, opened, ...
            let replayed = budget.consume()
            #expect(replayed)
            budget.restore()
        }
        let first = budget.consume()
        let second = budget.consume()
        #expect(first)
        #expect(!second)  // two 401s with no successful open between them: give up
    }
}

/// Records every request and answers from a script (the last answer repeats).
private final class ScriptedTransport: HTTPTransport {
    private let state: Mutex<(requests: [HTTPRequest], answers: [HTTPResponse])>

    init(_ answers: [HTTPResponse] = [HTTPResponse(status: 200)]) { state = Mutex(([], answers)) }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }

    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        HTTPStreamingResponse(
            state.withLock { s in
                s.requests.append(request)
                return s.answers.count > 1 ? s.answers.removeFirst() : s.answers.first ?? HTTPResponse(status: 200)
            })
    }
}

/// Hands out `Bearer token-N`, N being the current version; invalidation bumps it.
private final class VersionedCredential: CredentialSource {
    let isRenewable: Bool
    private let state = Mutex((version: UInt64(1), invalidated: [CredentialStamp]()))

    init(renewable: Bool = true) { isRenewable = renewable }

    var invalidated: [CredentialStamp] { state.withLock { $0.invalidated } }

    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let version = state.withLock { $0.version }
        request.headers.set(name: "Authorization", value: "Bearer token-\(version)")
        return CredentialStamp(version)
    }

    func invalidate(stamp: CredentialStamp) async throws {
        state.withLock { s in
            s.invalidated.append(stamp)
            if s.version == stamp.value { s.version += 1 }
        }
    }
}

/// Under the forwarding policy a body that was sent as it was produced (`tokenrelay exec`'s big
/// uploads) is never sent again: the 401 is the caller's, and the refused token is still
/// invalidated; a body kept whole goes again once.
@Suite struct StreamedBodyRecoveryTests {
    fileprivate static func client(_ transport: ScriptedTransport, _ source: VersionedCredential) -> HTTPClient {
        HTTPClient(
            transport: transport,
            middlewares: [
                CredentialsMiddleware(
                    source: source, origins: CredentialsMiddlewareTests.policy,
                    forwarding: CredentialsMiddleware.Forwarding(logIn: {}))
            ])
    }

    @Test func aStreamedBodyIsNotReplayedAfterA401() async throws {
        let transport = ScriptedTransport([CredentialsMiddlewareTests.invalidToken, HTTPResponse(status: 200)])
        let source = VersionedCredential()
        var request = HTTPRequest(method: "POST", url: "https://api.example.com/v1/upload")
        request.bodyStream = HTTPRequestBodyStream(length: nil)
        let response = try await Self.client(transport, source).send(collecting: request)
        #expect(response.status == 401)
        #expect(transport.requests.count == 1)
        #expect(source.invalidated == [CredentialStamp(1)])
    }

    @Test func aBodyKeptWholeIsReplayedOnce() async throws {
        let transport = ScriptedTransport([CredentialsMiddlewareTests.invalidToken, HTTPResponse(status: 200)])
        let source = VersionedCredential()
        let request = HTTPRequest(method: "POST", url: "https://api.example.com/v1/upload", body: Array("x".utf8))
        let response = try await Self.client(transport, source).send(collecting: request)
        #expect(response.status == 200)
        #expect(transport.requests.map { $0.headers["Authorization"] } == ["Bearer token-1", "Bearer token-2"])
    }
}
