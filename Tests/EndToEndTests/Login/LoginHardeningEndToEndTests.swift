import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// A scripted OpenID Connect authorization server (`Fixtures/scripted_idp.py`): what a real
/// server will not do on demand (hostile text, RFC 9207 `iss` variants, another person's ID token
/// on refresh), rewritten between steps of a test.
final class ScriptedIdP: Sendable {
    let fixture: FixtureServer
    let port: Int
    let scriptPath: String
    let logPath: String

    init(_ script: JSONValue = .object([:])) async throws {
        let directory = try TemporaryDirectory.make()
        scriptPath = directory.appendingPathComponent("script.json").path
        logPath = directory.appendingPathComponent("requests.log").path
        try Data().write(to: URL(fileURLWithPath: logPath))
        fixture = try await FixtureServer(
            script: RecordingServer.fixtures.appendingPathComponent("scripted_idp.py").path, [scriptPath, logPath],
            words: 1)
        port = fixture.ports[0]
        try set(script)
    }

    var origin: String { "http://127.0.0.1:\(port)" }

    /// Replaces the script (atomically: the server reads it on every request).
    func set(_ script: JSONValue) throws {
        try Data(script.jsonText.utf8).write(to: URL(fileURLWithPath: scriptPath), options: .atomic)
    }

    /// The requests received so far.
    var requests: [JSONValue] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// Token requests of `grant` received so far.
    func tokenRequests(grant: String) -> Int {
        requests.filter { $0["path"]?.stringValue == "/token" && $0["form"]?["grant_type"]?.stringValue == grant }
            .count
    }

    /// A config with one environment on this server and the given profiles.
    func config(_ profiles: [(name: String, lines: [String])]) throws -> String {
        var text = """
            version: 1
            default_environment: local
            environments:
              local:
                base_url: \(origin)/api
                default_profile: \(profiles.first?.name ?? "none")
                profiles:

            """
        for profile in profiles {
            text += "      \(profile.name):\n"
            for line in profile.lines { text += "        \(line)\n" }
        }
        return try TemporaryDirectory.file(text)
    }

    /// An OpenID Connect authorization-code profile of this server.
    func browserProfile(_ extra: [String] = []) -> [String] {
        [
            "type: authorization_code", "issuer: \(origin)", "client_id: cli", "scopes: [openid]",
            "redirect: { path: /cb }",
        ]
            + extra
    }

    /// Plays the person's browser: follows the prompt's URL to this server's authorization
    /// endpoint and returns where it redirects (the callback, not yet delivered).
    func authorize(_ url: String) async throws -> String {
        let answer = try await LoopbackHTTP.get(url)
        guard answer.status == 302, let location = answer.header("Location") else {
            throw LoopbackHTTP.Failure(description: "authorize answered \(answer.status)")
        }
        return location
    }
}

/// Issue 34, finding 6: nothing a local process does to the loopback listener delays a login's
/// callback, its `login_timeout`, its cancellation (and the next login), or the process's exit.
@Suite struct LoginListenerEndToEndTests {
    /// The redirect listener's port, from the prompt's `redirect_uri`.
    static func listenerPort(_ promptURL: String) throws -> Int {
        let redirect = URLComponents(string: promptURL)?.queryItems?.first { $0.name == "redirect_uri" }?.value
        return try #require(redirect.flatMap { URLComponents(string: $0)?.port })
    }

    /// Opens, to the listener, a connection that sends nothing and one that sends a request head
    /// one byte a second (as long as the listener keeps it); both stay open until the test ends.
    final class HostileConnections: Sendable {
        let idle: Int32
        let slow: Int32
        let trickle: Task<Void, Never>

        init(port: Int) async throws {
            idle = try await LoopbackHTTP.connect(port: port)
            slow = try await LoopbackHTTP.connect(port: port)
            trickle = Task { [slow] in
                for byte in Array("GET /cb?state=guess HTTP/1.1\r\nHost: 127.0.0.1\r\nX: ".utf8)
                    + [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
                {
                    guard LoopbackHTTP.send(slow, [byte]), (try? await Task.sleep(for: .seconds(1))) != nil else {
                        return
                    }
                }
            }
        }

        deinit {
            trickle.cancel()
            close(idle)
            close(slow)
        }
    }

    /// Sends `login` and returns the URL of the `auth-prompt` it caused (the next one).
    static func startLogin(_ relay: RelayProcess, id: String, profile: String = "me") async throws -> String {
        func prompts() -> [JSONValue] { relay.parsedLines.filter { $0["method"]?.stringValue == "auth-prompt" } }
        let before = prompts().count
        try relay.send(#"{"jsonrpc":"2.0","id":"\#(id)","method":"login","params":{"profile":"\#(profile)"}}"#)
        _ = try await relay.firstLine(timeout: .seconds(60), what: "auth-prompt of \(id)") { _ in
            prompts().count > before
        }
        return try #require(prompts().last?["params"]?["url"]?.stringValue)
    }

    @Test func idleAndTricklingConnectionsDelayNeitherTheCallbackNorTheExit() async throws {
        let idp = try await ScriptedIdP()
        let config = try idp.config([("me", idp.browserProfile()), ("other", idp.browserProfile())])
        // A drain grace of 0.5 s (test-only setting): a login still waiting for its person at
        // stdin's end is then cancelled, which must stop its listener at once.
        let relay = try RelayProcess(
            ["serve", "--config", config, "--log-level", "debug"], environment: ["TOKENRELAY_TEST_GRACE_MS": "500"])

        let url = try await Self.startLogin(relay, id: "login-1")
        let hostile = try await HostileConnections(port: try Self.listenerPort(url))
        let callback = try await idp.authorize(url)
        // The browser's callback arrives after both; the login is stored within 2 s.
        async let page = LoopbackHTTP.get(callback, timeout: 30)
        let answer = try await relay.answer(id: "login-1", timeout: .seconds(2))
        #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
        #expect(answer["result"]?["subject"]?.stringValue == "alice")
        #expect(try await page.body.contains("Login succeeded"))
        _ = hostile

        // A second login is waiting, with both kinds of connection open on its listener, when
        // stdin ends: the process still exits within 2 s (the grace, then the login's cancellation).
        let second = try await Self.startLogin(relay, id: "login-2", profile: "other")
        let more = try await HostileConnections(port: try Self.listenerPort(second))
        try relay.closeStdin()
        #expect(try await relay.exitCode(timeout: .seconds(2)) == 0, "\(relay.stderrText.suffix(2000))")
        _ = more
    }

    @Test func aLoginWithAHeldConnectionEndsAtLoginTimeoutAndTheNextLoginWorks() async throws {
        let idp = try await ScriptedIdP()
        // A login_timeout long enough for a test process starved by a full parallel run to connect
        // before it passes (it is also the test's duration).
        let config = try idp.config([("me", idp.browserProfile(["login_timeout: 30s"]))])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "debug"], testMethods: false)

        // login_timeout is honoured while a connection trickles.
        let first = try await Self.startLogin(relay, id: "login-1")
        let hostile = try await HostileConnections(port: try Self.listenerPort(first))
        let timedOut = try await relay.answer(id: "login-1", timeout: .seconds(90))
        #expect(timedOut["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(timedOut.jsonText)")

        // A login cancelled while connections hang open releases everything it held: the next
        // login of the session prompts at once and completes.
        let second = try await Self.startLogin(relay, id: "login-2")
        let more = try await HostileConnections(port: try Self.listenerPort(second))
        try relay.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"login-2"}}"#)
        let cancelled = try await relay.answer(id: "login-2")
        #expect(cancelled["error"]?["data"]?["kind"]?.stringValue == "cancelled", "\(cancelled.jsonText)")
        // Were the second login's lease still held, the third would wait for it past its own
        // login_timeout and never prompt.
        let third = try await Self.startLogin(relay, id: "login-3")
        let callback = try await idp.authorize(third)
        async let page = LoopbackHTTP.get(callback, timeout: 30)
        let answer = try await relay.answer(id: "login-3")
        #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
        #expect(try await page.status == 200)
        _ = (hostile, more)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }
}

/// The bytes no server text may bring to stdout or stderr (issue 34, finding 7): C0 controls but
/// the newline, DEL, C1 controls (`C2 80`...`C2 9F`), bidirectional overrides (`E2 80 AE`...).
func unsafeBytes(in text: String) -> [String] {
    let bytes = Array(text.utf8)
    var found: [String] = []
    for index in bytes.indices {
        let byte = bytes[index]
        if (byte < 0x20 && byte != 0x0A) || byte == 0x7F { found.append(String(format: "%02X at %d", byte, index)) }
        if byte == 0xC2, index + 1 < bytes.count, (0x80...0x9F).contains(bytes[index + 1]) {
            found.append(String(format: "C2 %02X at %d", bytes[index + 1], index))
        }
        if byte == 0xE2, index + 2 < bytes.count, bytes[index + 1] == 0x80 || bytes[index + 1] == 0x81,
            [0x8E, 0x8F, 0xAA, 0xAB, 0xAC, 0xAD, 0xAE, 0xA6, 0xA7, 0xA8, 0xA9].contains(bytes[index + 2])
        {
            found.append(String(format: "E2 %02X %02X at %d", bytes[index + 1], bytes[index + 2], index))
        }
    }
    return found
}

/// Issue 34, finding 7 and the device-login extras: text an authorization server controls
/// reaches `login`, `status`, `auth-prompt`, errors and the terminal only through the cleaner;
/// what must be used as it is (a URL to open, a code to type) is refused when it is unsafe.
@Suite struct LoginServerTextEndToEndTests {
    /// An ID token whose claims carry a terminal title sequence, a screen clear, a C1 CSI and a
    /// right-to-left override.
    static let hostileClaims: JSONValue = [
        "sub": "alice\u{1B}]0;pwned\u{07}\u{1B}[2J", "name": "Al\u{9B}31mice \u{202E}evil",
        "email": "a\u{85}lice@example.test",
    ]

    @Test func tokenrelayLoginPrintsTheSubjectCleaned() async throws {
        let idp = try await ScriptedIdP(["claims": Self.hostileClaims])
        let config = try idp.config([("me", idp.browserProfile())])
        let process = try RelayProcess(["login", "--config", config, "--no-browser"], testMethods: false)
        let line = try await process.stderrLine(containing: "/authorize?")
        let url = try #require(line.split(separator: " ").last.map(String.init))
        let callback = try await idp.authorize(url)
        _ = try await LoopbackHTTP.get(callback)
        #expect(try await process.exitCode() == 0, "\(process.stderrText)")
        #expect(process.stderrText.contains("logged in as alice ]0;pwned  [2J"), "\(process.stderrText)")
        #expect(unsafeBytes(in: process.stderrText).isEmpty, "\(unsafeBytes(in: process.stderrText))")
        #expect(process.stdoutText.isEmpty)
    }

    @Test func loginAndStatusReturnTheClaimsCleaned() async throws {
        let idp = try await ScriptedIdP(["claims": Self.hostileClaims])
        let config = try idp.config([("me", idp.browserProfile())])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "trace"], testMethods: false)
        let url = try await LoginListenerEndToEndTests.startLogin(relay, id: "login-1")
        _ = try await LoopbackHTTP.get(try await idp.authorize(url))
        let answer = try await relay.answer(id: "login-1")
        #expect(answer["result"]?["subject"]?.stringValue == "alice ]0;pwned  [2J", "\(answer.jsonText)")
        #expect(answer["result"]?["name"]?.stringValue == "Al 31mice  evil")
        #expect(answer["result"]?["email"]?.stringValue == "a lice@example.test")
        let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
        #expect(session?["subject"] == answer["result"]?["subject"], "\(session?.jsonText ?? "")")
        #expect(session?["name"] == answer["result"]?["name"])
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        // JSON escapes a C0 control, never a C1 one or an override: the raw bytes are the test.
        #expect(unsafeBytes(in: relay.stdoutText).isEmpty, "\(unsafeBytes(in: relay.stdoutText))")
        #expect(unsafeBytes(in: relay.stderrText).isEmpty, "\(unsafeBytes(in: relay.stderrText))")
        #expect(!relay.stdoutText.contains(#"\u001b"#), "no escaped ESC either")
    }

    /// A device login whose server sends something a person cannot safely see or use: refused
    /// with kind `auth` before any prompt; nothing of it reaches an output.
    @Test(
        arguments: [
            ["user_code": "ABCD\u{9B}2J", "verification_uri": "{origin}/activate"],
            ["user_code": .string(String(repeating: "A", count: 65)), "verification_uri": "{origin}/activate"],
            ["user_code": "ABCD-EFGH", "verification_uri": "http://as.example.test/activate"],
            [
                "user_code": "ABCD-EFGH", "verification_uri": "{origin}/activate",
                "verification_uri_complete": "{origin}/activate?c=\u{202E}exe.HGFE-DCBA",
            ],
        ] as [JSONValue])
    func anUnsafeDeviceAuthorizationIsRefused(device: JSONValue) async throws {
        var answer = try #require(device.objectValue)
        answer["device_code"] = "dc-secret-1"
        answer["expires_in"] = 600
        let idp = try await ScriptedIdP(["device": .object(answer)])
        let config = try idp.config([
            ("tv", ["type: device_code", "issuer: \(idp.origin)", "client_id: tv", "scopes: [openid]"])
        ])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "trace"], testMethods: false)
        let login = try await relay.call("login", ["profile": "tv"])
        #expect(login["error"]?["data"]?["kind"]?.stringValue == "auth", "\(login.jsonText)")
        #expect(!relay.stdoutText.contains("auth-prompt"))
        #expect(idp.tokenRequests(grant: "urn:ietf:params:oauth:grant-type:device_code") == 0)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        #expect(unsafeBytes(in: relay.stdoutText + relay.stderrText).isEmpty)
        #expect(!relay.stdoutText.contains("as.example.test"), "the refused URL is not shown")
    }

    @Test func aDiscoveredAuthorizationEndpointWithAC1ControlIsRefused() async throws {
        let idp = try await ScriptedIdP(["metadata": ["authorization_endpoint": "{origin}/author\u{9B}ize"]])
        let config = try idp.config([("me", idp.browserProfile())])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "trace"], testMethods: false)
        let login = try await relay.call("login", ["profile": "me"])
        #expect(login["error"]?["data"]?["kind"]?.stringValue == "auth", "\(login.jsonText)")
        #expect(!relay.stdoutText.contains("auth-prompt"))
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        #expect(unsafeBytes(in: relay.stdoutText + relay.stderrText).isEmpty)
    }

    @Test func aDeviceLoginPromptsWithTheCodeAndURIs() async throws {
        let idp = try await ScriptedIdP([
            "device": [
                "device_code": "dc-secret-1", "user_code": "WDJB-MJHT", "verification_uri": "{origin}/activate",
                "verification_uri_complete": "{origin}/activate?user_code=WDJB-MJHT", "expires_in": 600,
                "interval": 1,
            ], "claims": Self.hostileClaims,
        ])
        let config = try idp.config([
            ("tv", ["type: device_code", "issuer: \(idp.origin)", "client_id: tv", "scopes: [openid]"])
        ])
        let relay = try RelayProcess(["serve", "--config", config], testMethods: false)
        let login = try await relay.call("login", ["profile": "tv"])
        #expect(login["result"]?["subject"]?.stringValue == "alice ]0;pwned  [2J", "\(login.jsonText)")
        let prompt = relay.parsedLines.first { $0["method"]?.stringValue == "auth-prompt" }?["params"]
        #expect(prompt?["userCode"]?.stringValue == "WDJB-MJHT")
        #expect(prompt?["url"]?.stringValue == "\(idp.origin)/activate")
        #expect(prompt?["verificationUriComplete"]?.stringValue == "\(idp.origin)/activate?user_code=WDJB-MJHT")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }
}

/// RFC 9207 (SPEC §9.5): the authorization response's `iss`.
@Suite struct LoginIssuerEndToEndTests {
    /// Logs in with the redirect the script makes; the `login` answer and the browser's page.
    static func login(_ script: JSONValue) async throws -> (answer: JSONValue, page: String, idp: ScriptedIdP) {
        let idp = try await ScriptedIdP(script)
        let config = try idp.config([("me", idp.browserProfile())])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "trace"], testMethods: false)
        let url = try await LoginListenerEndToEndTests.startLogin(relay, id: "login-1")
        let page = try await LoopbackHTTP.get(try await idp.authorize(url))
        let answer = try await relay.answer(id: "login-1")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        #expect(!relay.stderrText.contains("hostile-description"), "the callback's error is not shown")
        return (answer, page.body, idp)
    }

    @Test func theExpectedIssAndNoIssWhereNoneIsPromisedAreAccepted() async throws {
        for script: JSONValue in [
            ["redirect": ["iss": "{origin}"], "metadata": ["authorization_response_iss_parameter_supported": true]],
            ["redirect": ["iss": "{origin}"]], [:],
        ] {
            let (answer, page, _) = try await Self.login(script)
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(script.jsonText): \(answer.jsonText)")
            #expect(page.contains("Login succeeded"))
        }
    }

    @Test(
        arguments: [
            // Another server's iss, with an error it wants shown and acted on.
            [
                "redirect": [
                    "iss": "https://attacker.example", "error": "access_denied",
                    "error_description": "hostile-description",
                ]
            ],
            ["redirect": ["iss": "{origin}/"]],
            // The metadata promises iss; the response has none.
            ["metadata": ["authorization_response_iss_parameter_supported": true]],
            [
                "metadata": ["authorization_response_iss_parameter_supported": true],
                "redirect": ["error": "access_denied", "error_description": "hostile-description"],
            ],
        ] as [JSONValue])
    func aWrongOrMissingIssEndsTheLoginWithKindAuth(script: JSONValue) async throws {
        let (answer, page, idp) = try await Self.login(script)
        let error = answer["error"]
        #expect(error?["data"]?["kind"]?.stringValue == "auth", "\(answer.jsonText)")
        #expect(error?["data"]?["oauthError"] == nil, "the callback's error is not acted on")
        #expect(error?["message"]?.stringValue?.contains("RFC 9207") == true)
        #expect(!answer.jsonText.contains("hostile-description") && !answer.jsonText.contains("access_denied"))
        #expect(page.contains("Login failed") && !page.contains("hostile-description"))
        #expect(idp.tokenRequests(grant: "authorization_code") == 0, "the code is never exchanged")
    }
}

/// OpenID Connect Core §12.2: an ID token returned by a refresh is validated as at login, and
/// must name the same person.
@Suite struct RenewalIDTokenEndToEndTests {
    static func loggedIn(_ idp: ScriptedIdP) async throws -> RelayProcess {
        let config = try idp.config([("me", idp.browserProfile())])
        let relay = try RelayProcess(["serve", "--config", config, "--log-level", "debug"], testMethods: false)
        let url = try await LoginListenerEndToEndTests.startLogin(relay, id: "login-1")
        _ = try await LoopbackHTTP.get(try await idp.authorize(url))
        let answer = try await relay.answer(id: "login-1")
        #expect(answer["result"]?["subject"]?.stringValue == "alice", "\(answer.jsonText)")
        return relay
    }

    /// The person is kept with the session in the store: another process that renews it refuses
    /// an ID token for someone else too.
    @Test func anotherProcessRefusesARenewalForAnotherPerson() async throws {
        let idp = try await ScriptedIdP()
        let config = try idp.config([("me", idp.browserProfile())])
        let state = RelayProcess.freshStateHome()
        let first = try RelayProcess(
            ["serve", "--config", config], environment: ["XDG_STATE_HOME": state], testMethods: false)
        let url = try await LoginListenerEndToEndTests.startLogin(first, id: "login-1")
        _ = try await LoopbackHTTP.get(try await idp.authorize(url))
        #expect(try await first.answer(id: "login-1")["result"]?["subject"]?.stringValue == "alice")
        try first.closeStdin()
        #expect(try await first.exitCode() == 0)

        try idp.set(["refresh_claims": ["sub": "mallory"]])
        let second = try RelayProcess(
            ["serve", "--config", config], environment: ["XDG_STATE_HOME": state], testMethods: false)
        let session = try await second.call("status")["result"]?["sessions"]?.arrayValue?.first
        #expect(session?["subject"]?.stringValue == "alice", "read from the store: \(session?.jsonText ?? "")")
        _ = try await second.call("token-invalidate", ["profile": "me"])
        let renewal = try await second.call("request", ["path": "/whoami", "profile": "me"])
        #expect(renewal["error"]?["data"]?["login"]?.boolValue == true, "\(renewal.jsonText)")
        #expect(idp.tokenRequests(grant: "refresh_token") == 1)
        try second.closeStdin()
        #expect(try await second.exitCode() == 0)
    }

    /// The keys that will check the renewal's ID token are fetched before the refresh token is
    /// spent: while they cannot be, the renewal fails without sending anything and the session is
    /// kept; once they can, it renews.
    @Test func anUnreachableJWKSFailsTheRenewalBeforeItIsSent() async throws {
        let idp = try await ScriptedIdP()
        let config = try idp.config([("me", idp.browserProfile())])
        let state = RelayProcess.freshStateHome()
        let first = try RelayProcess(
            ["serve", "--config", config], environment: ["XDG_STATE_HOME": state], testMethods: false)
        let url = try await LoginListenerEndToEndTests.startLogin(first, id: "login-1")
        _ = try await LoopbackHTTP.get(try await idp.authorize(url))
        _ = try await first.answer(id: "login-1")
        try first.closeStdin()
        #expect(try await first.exitCode() == 0)

        // A new process has no keys cached.
        try idp.set(["jwks_status": 503])
        let second = try RelayProcess(
            ["serve", "--config", config], environment: ["XDG_STATE_HOME": state], testMethods: false)
        _ = try await second.call("token-invalidate", ["profile": "me"])
        let failed = try await second.call("request", ["path": "/whoami", "profile": "me"])
        #expect(failed["error"]?["data"]?["kind"]?.stringValue == "transport", "\(failed.jsonText)")
        #expect(failed["error"]?["data"]?["login"] == nil)
        #expect(idp.tokenRequests(grant: "refresh_token") == 0, "the refresh token was not spent")
        try idp.set([:])
        let renewed = try await second.call("request", ["path": "/whoami", "profile": "me"])
        #expect(renewed["result"]?["status"]?.intValue == 404, "\(renewed.jsonText)")
        #expect(idp.tokenRequests(grant: "refresh_token") == 1)
        try second.closeStdin()
        #expect(try await second.exitCode() == 0)
    }

    @Test func aRenewalForTheSamePersonIsKept() async throws {
        let idp = try await ScriptedIdP(["refresh_claims": ["name": "Alice Renewed"]])
        let relay = try await Self.loggedIn(idp)
        _ = try await relay.call("token-invalidate", ["profile": "me"])
        let renewed = try await relay.call("request", ["path": "/whoami", "profile": "me"])
        #expect(renewed["result"]?["status"]?.intValue == 404, "\(renewed.jsonText)")
        #expect(idp.tokenRequests(grant: "refresh_token") == 1)
        let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
        #expect(session?["name"]?.stringValue == "Alice Renewed", "\(session?.jsonText ?? "")")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    @Test(arguments: [
        ["refresh_claims": ["sub": "mallory"]] as JSONValue, ["refresh_claims": ["aud": "someone-else"]],
        ["refresh_claims": ["iss": "https://attacker.example"]], ["refresh_claims": ["exp": 1]],
    ])
    func aRenewalWithAnotherPersonsOrAnInvalidIDTokenEndsTheSession(script: JSONValue) async throws {
        let idp = try await ScriptedIdP(script)
        let relay = try await Self.loggedIn(idp)
        _ = try await relay.call("token-invalidate", ["profile": "me"])
        let renewal = try await relay.call("request", ["path": "/whoami", "profile": "me"])
        #expect(renewal["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(renewal.jsonText)")
        #expect(renewal["error"]?["data"]?["login"]?.boolValue == true)
        let failed = try await relay.firstLine(timeout: .seconds(60), what: "auth-failed") {
            $0["method"]?.stringValue == "auth-failed"
        }
        #expect(failed["params"]?["kind"]?.stringValue == "interaction_required", "\(failed.jsonText)")
        // Nothing of that response is used: no token, the session needs a login, what it issued
        // was revoked at the server.
        let again = try await relay.call("request", ["path": "/whoami", "profile": "me"])
        #expect(again["error"]?["data"]?["login"]?.boolValue == true, "\(again.jsonText)")
        #expect(!relay.stdoutText.contains("at-2"), "the renewal's access token is never handed out")
        let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
        #expect(session?["state"]?.stringValue == "interaction_required", "\(session?.jsonText ?? "")")
        #expect(session?["subject"] == nil)
        let revoked = idp.requests.filter { $0["path"]?.stringValue == "/revoke" }.compactMap {
            $0["form"]?["token"]?.stringValue
        }
        #expect(revoked.contains("rt-2") && revoked.contains("at-2"), "\(revoked)")
        #expect(idp.tokenRequests(grant: "refresh_token") == 1)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }
}
