import Foundation
import TestSupport
import Testing

@testable import TokenRelayAuth

#if canImport(Glibc)
    import Glibc
#endif

/// The login's loopback listener under what any local process can do to it (issue 34, finding 6):
/// connections that send nothing, or a byte at a time, or too much, never delay the callback or a
/// stop. Waits are bounded; nothing here asserts a duration.
@Suite struct LoopbackRedirectListenerTests {
    static let state = "state-0123456789"

    init() { PoolWatchdog.startIfRequested() }

    /// Sends one byte of a request head every 50 ms until the peer closes the connection; true
    /// when it was closed (by the listener) before `limit` bytes.
    static func trickle(_ fd: Int32, limit: Int) async -> Bool {
        let head = Array("GET /callback?state=x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ".utf8)
        for index in 0..<limit {
            let byte = index < head.count ? head[index] : UInt8(ascii: "a")
            guard LoopbackHTTP.send(fd, [byte]) else { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test func idleAndTricklingConnectionsDoNotDelayTheCallback() async throws {
        let listener = try LoopbackRedirectListener.bind(ports: [0], path: "/callback")
        let waiting = Task { try await listener.callback(state: Self.state) }
        let idle = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(idle) }
        let slow = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(slow) }
        let trickling = Task { await Self.trickle(slow, limit: 10_000) }
        defer { trickling.cancel() }
        // The page is written by the login once it is done; here, once the test answers it.
        async let page = LoopbackHTTP.get(
            "http://127.0.0.1:\(listener.port)/callback?code=c-1&state=\(Self.state)", timeout: 60)
        let (callback, answer) = try await waiting.value
        #expect(callback == RedirectCallback(.code("c-1")))
        answer.send(.success)
        #expect(try await page.body.contains("Login succeeded"))
    }

    @Test func aConnectionTooSlowToSendItsHeadIsCutOffAndTheCallbackStillArrives() async throws {
        let listener = try LoopbackRedirectListener.bind(ports: [0], path: "/callback", headTimeout: .milliseconds(300))
        let waiting = Task { try await listener.callback(state: Self.state) }
        let slow = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(slow) }
        // A byte every 50 ms keeps any per-read timeout alive; the head's own deadline ends it.
        #expect(await Self.trickle(slow, limit: 2_000), "the listener closed the trickling connection")
        let idle = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(idle) }
        #expect(await LoopbackHTTP.readToEnd(idle, timeout: 30) == [], "an idle connection is closed at its deadline")
        #expect(listener.refusedRequests.load(ordering: .relaxed) == 2)
        async let page = LoopbackHTTP.get(
            "http://127.0.0.1:\(listener.port)/callback?code=c-2&state=\(Self.state)", timeout: 60)
        let (callback, answer) = try await waiting.value
        #expect(callback.outcome == .code("c-2"))
        answer.send(.success)
        #expect(try await page.status == 200)
    }

    @Test func aHeadPastTheBoundIsRefusedAndTheCallbackStillArrives() async throws {
        let listener = try LoopbackRedirectListener.bind(ports: [0], path: "/callback")
        let waiting = Task { try await listener.callback(state: Self.state) }
        let fd = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(fd) }
        var head = Array("GET /callback?state=\(Self.state)&code=c HTTP/1.1\r\nX-Big: ".utf8)
        head += [UInt8](repeating: UInt8(ascii: "a"), count: LoopbackRedirectListener.maximumRequestHead)
        _ = LoopbackHTTP.send(fd, head)
        // Answered 400 and closed once the bound is read; the bytes past it are never read, so
        // the close may reach the client as a reset that discards the page: either way, it ends.
        let ended = await LoopbackHTTP.readToEnd(fd, timeout: 30)
        let answer = try #require(ended, "the connection was ended")
        #expect(answer.isEmpty || String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 400 "))
        #expect(listener.refusedRequests.load(ordering: .relaxed) == 1)
        async let page = LoopbackHTTP.get(
            "http://127.0.0.1:\(listener.port)/callback?code=c-4&state=\(Self.state)", timeout: 60)
        let (callback, browser) = try await waiting.value
        #expect(callback.outcome == .code("c-4"))
        browser.send(.success)
        #expect(try await page.status == 200)
    }

    @Test func aStopEndsTheWaitWhileConnectionsHangOpen() async throws {
        let listener = try LoopbackRedirectListener.bind(ports: [0], path: "/callback")
        let waiting = Task { try await listener.callback(state: Self.state) }
        let idle = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(idle) }
        let slow = try await LoopbackHTTP.connect(port: listener.port)
        defer { close(slow) }
        _ = LoopbackHTTP.send(slow, Array("GET /callback".utf8))
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        // Every connection was closed with the listener.
        #expect(await LoopbackHTTP.readToEnd(idle, timeout: 30) == [])
        #expect(await LoopbackHTTP.readToEnd(slow, timeout: 30) == [])
    }

    @Test func manyConnectionsAtOncePushOutTheOldestNotTheCallback() async throws {
        let listener = try LoopbackRedirectListener.bind(ports: [0], path: "/callback")
        let waiting = Task { try await listener.callback(state: Self.state) }
        var idle: [Int32] = []
        for _ in 0..<(LoopbackRedirectListener.maximumConnections + 8) {
            idle.append(try await LoopbackHTTP.connect(port: listener.port))
        }
        defer { for fd in idle { close(fd) } }
        async let page = LoopbackHTTP.get(
            "http://127.0.0.1:\(listener.port)/callback?code=c-3&state=\(Self.state)", timeout: 60)
        let (callback, answer) = try await waiting.value
        #expect(callback.outcome == .code("c-3"))
        answer.send(.success)
        #expect(try await page.status == 200)
    }

    @Test(arguments: [
        ("code=c&state=S", [String]()), ("code=c&state=S&iss=https%3A%2F%2Fas.example", ["https://as.example"]),
        ("error=access_denied&state=S&iss=a&iss=b", ["a", "b"]),
    ])
    func theCallbackKeepsEveryIssParameter(query: String, issuers: [String]) {
        let decision = RedirectRequest.evaluate(
            target: "/cb?" + query.replacingOccurrences(of: "S", with: "st-1"), path: "/cb", state: "st-1")
        guard case .callback(let callback) = decision else {
            Issue.record("not a callback: \(decision)")
            return
        }
        #expect(callback.issuers == issuers)
    }

    @Test func theIssuerCheckFollowsRFC9207() throws {
        let issuer = "https://as.example"
        try TokenManager.checkIssuer([], expected: issuer, required: false)
        try TokenManager.checkIssuer([issuer], expected: issuer, required: true)
        try TokenManager.checkIssuer(["https://other.example"], expected: nil, required: false)
        for (issuers, required) in [
            ([String](), true), (["https://as.example/"], false), (["https://AS.example"], true),
            ([issuer, issuer], true), (["https://evil.example"], false),
        ] {
            #expect(throws: AuthError.self) {
                try TokenManager.checkIssuer(issuers, expected: issuer, required: required)
            }
        }
        #expect(AuthError.wrongIssuer("x").errorKind == .auth)
        #expect(AuthError.wrongIssuer("x").oauthError == nil)
    }

    /// The head parser gives the same answer however the bytes are cut.
    @Test(arguments: [1, 2, 3, 7, 64, 4096])
    func aRequestHeadIsReadTheSameInAnyChunks(chunk: Int) {
        let cases: [(String, String??)] = [
            ("GET /cb?code=c&state=s HTTP/1.1\r\nHost: x\r\n\r\n", .some("/cb?code=c&state=s")),
            ("GET /cb HTTP/1.0\n\n", .some("/cb")),
            ("POST /cb HTTP/1.1\r\n\r\n", .some("")),
            ("GET /cb HTTP/1.1\r\nHost: x\r\n", nil),
            ("GET /cb\r\n\r\n", .some("")),
        ]
        for (text, expected) in cases {
            var head = RequestHead()
            var result: String?? = nil
            let bytes = Array(text.utf8)
            for start in stride(from: 0, to: bytes.count, by: chunk) where result == nil {
                head.append(bytes[start..<min(start + chunk, bytes.count)])
                result = head.target
            }
            #expect(result == expected, "\(text.debugDescription) in chunks of \(chunk)")
        }
        var huge = RequestHead()
        huge.append(ArraySlice(repeating: UInt8(ascii: "a"), count: LoopbackRedirectListener.maximumRequestHead + 10))
        #expect(huge.target == .some(nil), "past the bound without a blank line: refused")
    }

    @Test func theBrowserPageShowsNoControlOrBidiCharacter() {
        let page = BrowserPage.failure("refused \u{1B}[2J \u{9B}x \u{202E}evil <b>")
        let body = String(decoding: page.response, as: UTF8.self)
        #expect(body.contains("refused  [2J  x  evil &lt;b&gt;"), "\(body)")
    }
}
