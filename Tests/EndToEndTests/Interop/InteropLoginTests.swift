import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Interactive logins (SPEC §5.4) against the real authorization server: the test plays the
/// person with `Fixtures/login_agent.py`, which logs in at the server's own login form, approves
/// (or denies), and delivers the redirect to tokenrelay's loopback listener.
@Suite(.serialized) struct InteropLoginTests {
    /// The seeded public PKCE client, OpenID Connect.
    static func publicClient(_ stack: InteropStack, scopes: String = "[openid, read]") -> [String] {
        [
            "type: authorization_code", "issuer: \(stack.issuer)", "client_id: cli", "scopes: \(scopes)",
            "redirect: { path: /cb }",
        ]
    }

    static func deviceClient(_ stack: InteropStack) -> [String] {
        [
            "type: device_code", "issuer: \(stack.issuer)", "client_id: tv", "scopes: [read]",
            // The AS's metadata does not name its device endpoint.
            "device_authorization_url: \(stack.values["AS_URL"] ?? "")/o/device-authorization/",
        ]
    }

    /// Runs the user agent; its JSON output.
    static func agent(_ stack: InteropStack, _ arguments: [String]) async throws -> JSONValue {
        let script = InteropStack.repositoryRoot.appendingPathComponent("Tests/EndToEndTests/Fixtures/login_agent.py")
        let python = stack.values["VENV_PYTHON"] ?? "python3"
        let result = try await InteropStack.run(
            python, [script.path] + arguments, in: stack.stateDirectory, timeout: .seconds(120))
        guard result.status == 0 else {
            throw InteropStack.Failure(description: "login agent failed: \(result.stderr.suffix(1500))")
        }
        return try JSONParser.parse(result.stdout)
    }

    /// Sends `login` and waits for its `auth-prompt`; returns the request id and the prompt params.
    static func startLogin(_ relay: RelayProcess, profile: String, id: String = "login-1") async throws -> JSONValue {
        try relay.send(#"{"jsonrpc":"2.0","id":"\#(id)","method":"login","params":{"profile":"\#(profile)"}}"#)
        let prompt = try await relay.firstLine(timeout: .seconds(60), what: "auth-prompt") {
            $0["method"]?.stringValue == "auth-prompt"
        }
        return prompt["params"] ?? .null
    }

    static func promptCount(_ relay: RelayProcess) -> Int {
        relay.stdoutText.split(separator: "\n").filter { $0.contains(#""method":"auth-prompt""#) }.count
    }

    @Test func publicClientLogsInWithPKCEAndRequestsActAsThePerson() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack))])
            let params = try await Self.startLogin(relay, profile: "me")
            #expect(params["kind"]?.stringValue == "browser")
            let url = try #require(params["url"]?.stringValue)
            #expect(url.hasPrefix(stack.issuer + "/authorize/?"))
            #expect(url.contains("code_challenge_method=S256") && url.contains("nonce=") && url.contains("state="))
            #expect(url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A"))

            // While the login waits for the person, a non-interactive call fails at once.
            let early = try await relay.call("request", ["path": "/whoami"])
            #expect(early["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(early.jsonText)")
            #expect(early["error"]?["data"]?["login"]?.boolValue == true)
            // What the login would ask for (SPEC §9.2: after a step-up, the union).
            #expect(early["error"]?["data"]?["scopes"]?.arrayValue?.compactMap(\.stringValue) == ["openid", "read"])
            let stream = try await relay.call("subscribe", ["path": "/events"])
            #expect(stream["error"]?["data"]?["login"]?.boolValue == true, "\(stream.jsonText)")

            // A callback with the wrong state, and one to another path, are refused; the login goes on.
            let browser = try await Self.agent(stack, ["browser", url, "--wrong-state-first"])
            #expect(browser["refused"]?.arrayValue?.compactMap(\.intValue) == [400, 404], "\(browser.jsonText)")
            #expect(browser["status"]?.intValue == 200)
            #expect(browser["page"]?.stringValue?.contains("Login succeeded") == true)
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            #expect(answer["result"]?["subject"]?.stringValue == "1")

            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["status"]?.intValue == 200, "\(whoami.jsonText)")
            #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice")
            #expect(whoami["result"]?["json"]?["client_id"]?.stringValue == "cli")
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["subject"]?.stringValue == "1", "\(session?.jsonText ?? "")")
            #expect(session?["state"]?.stringValue == "valid")
            #expect(try await stack.issuedCount(client: "cli") == 1)
            #expect(Self.promptCount(relay) == 1)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    /// Issue 34, finding 6, against the real server: a connection that sends nothing and one that
    /// trickles a byte a second are open on the listener when the browser arrives; the login
    /// completes, and the process exits at once at stdin's end.
    @Test func aLoginCompletesWhileOtherConnectionsHangOnTheListener() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack))])
            let params = try await Self.startLogin(relay, profile: "me")
            let url = try #require(params["url"]?.stringValue)
            let hostile = try await LoginListenerEndToEndTests.HostileConnections(
                port: try LoginListenerEndToEndTests.listenerPort(url))
            let browser = try await Self.agent(stack, ["browser", url])
            #expect(browser["page"]?.stringValue?.contains("Login succeeded") == true, "\(browser.jsonText)")
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["subject"]?.stringValue == "1", "\(answer.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode(timeout: .seconds(2)) == 0)
            _ = hostile
        }
    }

    @Test func confidentialClientLogsInWithItsSecret() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [
                    (
                        "web",
                        [
                            "type: authorization_code", "issuer: \(stack.issuer)", "client_id: webapp",
                            "client_secret: { env: WEB_SECRET }", "client_auth: client_secret_basic",
                            "scopes: [read]", "redirect: { port: 0, path: /cb }",
                        ]
                    )
                ], environment: ["WEB_SECRET": "webapp-secret"])
            let params = try await Self.startLogin(relay, profile: "web")
            let browser = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? ""])
            #expect(browser["page"]?.stringValue?.contains("Login succeeded") == true, "\(browser.jsonText)")
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["json"]?["client_id"]?.stringValue == "webapp", "\(whoami.jsonText)")
            #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            #expect(!relay.stderrText.contains("webapp-secret"))
        }
    }

    @Test func aDeniedConsentEndsTheLoginWithKindAuth() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [
                    (
                        "consent",
                        [
                            "type: authorization_code", "issuer: \(stack.issuer)", "client_id: cliconsent",
                            "scopes: [read]",
                            "redirect: { path: /cb }",
                        ]
                    )
                ])
            let params = try await Self.startLogin(relay, profile: "consent")
            let browser = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? "", "--deny"])
            #expect(browser["location"]?.stringValue?.contains("error=access_denied") == true, "\(browser.jsonText)")
            let page = browser["page"]?.stringValue ?? ""
            #expect(page.contains("Login failed") && page.contains("access_denied"), "\(page)")
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["error"]?["data"]?["kind"]?.stringValue == "auth", "\(answer.jsonText)")
            #expect(answer["error"]?["data"]?["oauthError"]?.stringValue == "access_denied")
            #expect(try await stack.issuedCount(client: "cliconsent") == 0)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func aDeviceLoginIsApprovedAfterSeveralPolls() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("tv", Self.deviceClient(stack))])
            let params = try await Self.startLogin(relay, profile: "tv")
            #expect(params["kind"]?.stringValue == "device")
            let userCode = try #require(params["userCode"]?.stringValue)
            let url = try #require(params["url"]?.stringValue)
            // The person approves only once tokenrelay has polled twice (and been told to wait).
            _ = try await relay.stderrLine(containing: "poll 2 pending")
            _ = try await Self.agent(stack, ["device", url, userCode])
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice", "\(whoami.jsonText)")
            // Never polled again after success: one token issued, one approval line.
            #expect(try await stack.issuedCount(client: "tv") == 1)
            let approved = relay.stderrText.split(separator: "\n").filter { $0.contains("approved after") }
            #expect(approved.count == 1)
            if let line = approved.first { print("device login: \(line)") }
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func twentyConcurrentLoginsShareOnePromptAndOneCodeExchange() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack, scopes: "[read]"))])
            var batch = ""
            for index in 0..<20 {
                batch += #"{"jsonrpc":"2.0","id":"c\#(index)","method":"login","params":{"profile":"me"}}"# + "\n"
            }
            try relay.write(batch)
            let prompt = try await relay.firstLine(timeout: .seconds(60), what: "auth-prompt") {
                $0["method"]?.stringValue == "auth-prompt"
            }
            _ = try await Self.agent(stack, ["browser", prompt["params"]?["url"]?.stringValue ?? ""])
            for index in 0..<20 {
                let answer = try await relay.answer(id: "c\(index)")
                #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            }
            #expect(Self.promptCount(relay) == 1)
            #expect(try await stack.issuedCount(client: "cli") == 1)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func twoProcessesOnOneStoreLoggingInAtOnceShareOnePrompt() async throws {
        try await InteropStack.with { stack in
            let state = try InteropSharedStoreTests.sharedStateHome(stack)
            let config = try stack.writeConfig(profiles: [("me", Self.publicClient(stack, scopes: "[read]"))])
            let relays = try (0..<2).map { _ in
                try RelayProcess(
                    ["--config", config, "--log-level", "debug"], environment: ["XDG_STATE_HOME": state],
                    testMethods: false)
            }
            // The first process's login holds the session's login lease and prompts...
            let params = try await Self.startLogin(relays[0], profile: "me", id: "first")
            // ...the second one's login waits for that lease instead of opening another tab.
            try relays[1].send(#"{"jsonrpc":"2.0","id":"second","method":"login","params":{"profile":"me"}}"#)
            try await relays[1].waitForStderr("is held elsewhere; waiting (login)")
            let browser = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? ""])
            #expect(browser["page"]?.stringValue?.contains("Login succeeded") == true, "\(browser.jsonText)")
            for (relay, id) in zip(relays, ["first", "second"]) {
                let answer = try await relay.answer(id: id)
                #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
                let whoami = try await relay.call("request", ["path": "/whoami"])
                #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice", "\(whoami.jsonText)")
            }
            #expect(Self.promptCount(relays[0]) == 1)
            #expect(Self.promptCount(relays[1]) == 0)
            #expect(relays[1].stderrText.contains("another process logged in meanwhile"))
            #expect(try await stack.issuedCount(client: "cli") == 1)
            for relay in relays {
                try relay.closeStdin()
                #expect(try await relay.exitCode() == 0)
            }
        }
    }

    @Test func renewalByRefreshKeepsTheSessionAndLogoutRevokesAtTheServer() async throws {
        try await InteropStack.with(.init(accessTTL: 3)) { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack, scopes: "[read]"))])
            let params = try await Self.startLogin(relay, profile: "me")
            _ = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? ""])
            _ = try await relay.answer(id: "login-1")
            let first = try await relay.call("request", ["path": "/whoami"])
            #expect(first["result"]?["status"]?.intValue == 200, "\(first.jsonText)")
            // Wait (on status, not a fixed sleep) until the short-lived token is due for renewal.
            try await relay.waitForSession(state: "expired", timeout: .seconds(60))
            let second = try await relay.call("request", ["path": "/whoami"])
            #expect(second["result"]?["json"]?["username"]?.stringValue == "alice", "\(second.jsonText)")
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            // Renewed by refresh, never by a new login: one renewal, or more when a loaded machine
            // took longer than the token's 3 s to use the renewed one (its 401 renews again).
            let renewals = try #require(session?["counters"]?["renewals"]?.intValue, "\(session?.jsonText ?? "")")
            #expect(renewals >= 1, "\(session?.jsonText ?? "")")
            #expect(try await stack.issuedCount(client: "cli", kind: "refresh") == 1 + renewals)
            #expect(Self.promptCount(relay) == 1, "one login")

            let tokens = try await stack.issuedValues(client: "cli", kind: "access")
            let current = try #require(tokens.last)
            let logout = try await relay.call("logout", ["profile": "me"])
            #expect(logout["result"]?["loggedOut"]?.intValue == 1, "\(logout.jsonText)")
            let replay = try await stack.curl([
                "-sS", "-H", "Authorization: Bearer \(current)", "\(stack.rsURL)/whoami",
            ])
            #expect(replay.status == 401, "the access token was revoked at logout")
            let after = try await relay.call("request", ["path": "/whoami"])
            #expect(after["error"]?["data"]?["login"]?.boolValue == true, "\(after.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func aRefusedRefreshEndsTheSessionWithAuthFailed() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack, scopes: "[read]"))])
            let params = try await Self.startLogin(relay, profile: "me")
            _ = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? ""])
            _ = try await relay.answer(id: "login-1")
            let refresh = try #require(try await stack.issuedValues(client: "cli", kind: "refresh").last)
            try await stack.revoke(refresh, hint: "refresh_token", client: "cli", secret: nil)
            _ = try await relay.call("token-invalidate", ["profile": "me"])
            let answer = try await relay.call("request", ["path": "/whoami"])
            #expect(answer["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(answer.jsonText)")
            #expect(answer["error"]?["data"]?["login"]?.boolValue == true)
            let failed = try await relay.firstLine(timeout: .seconds(60), what: "auth-failed") {
                $0["method"]?.stringValue == "auth-failed"
            }
            #expect(failed["params"]?["kind"]?.stringValue == "interaction_required", "\(failed.jsonText)")
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "interaction_required")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func aTraceLevelLoginLeaksNoCodeVerifierOrToken() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", Self.publicClient(stack))], logLevel: "trace")
            let params = try await Self.startLogin(relay, profile: "me")
            let browser = try await Self.agent(stack, ["browser", params["url"]?.stringValue ?? ""])
            _ = try await relay.answer(id: "login-1")
            _ = try await relay.call("request", ["path": "/whoami"])
            _ = try await relay.call("token-invalidate", ["profile": "me"])
            _ = try await relay.call("request", ["path": "/whoami"])
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            let location = browser["location"]?.stringValue ?? ""
            let code = try #require(
                URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value)
            var secrets = try await stack.issuedValues(client: "cli")
            secrets.append(code)
            #expect(secrets.count >= 5)
            let output = relay.stdoutText + relay.stderrText
            for secret in secrets { #expect(!output.contains(secret), "a secret leaked") }
            #expect(!output.contains("code_verifier="))
            #expect(!output.contains("eyJ"), "no ID token (JWS) in the output")
        }
    }

    @Test func openBrowserRunsTheConfiguredCommandWithTheURL() async throws {
        try await InteropStack.with { stack in
            // The "browser" tokenrelay opens is the user agent itself: argv + [url], no shell.
            let script = InteropStack.repositoryRoot.appendingPathComponent(
                "Tests/EndToEndTests/Fixtures/login_agent.py")
            let python = stack.values["VENV_PYTHON"] ?? "python3"
            let relay = try stack.startRelay(
                profiles: [
                    ("me", Self.publicClient(stack) + ["open_browser: ['\(python)', '\(script.path)', browser]"])
                ])
            let answer = try await relay.call("login", ["profile": "me"])
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            #expect(Self.promptCount(relay) == 1, "the URL is still shown")
            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func tokenrelayLoginPrintsTheURLAndSaysAMemoryStoreLoginEndsWithIt() async throws {
        try await InteropStack.with { stack in
            let config = try stack.writeConfig(profiles: [("me", Self.publicClient(stack))])
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: config))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("store:\n  type: memory\n".utf8))
            try handle.close()
            let process = try RelayProcess(["login", "--config", config, "--profile", "me"], testMethods: false)
            let line = try await process.stderrLine(containing: "/authorize/?")
            let url = try #require(line.split(separator: " ").last.map(String.init))
            _ = try await Self.agent(stack, ["browser", url])
            #expect(try await process.exitCode() == 0, "\(process.stderrText)")
            #expect(process.stderrText.contains("logged in as 1"))
            #expect(process.stderrText.contains("lasts only as long as this process"))
            #expect(process.stdoutText.isEmpty)
        }
    }
}

/// One login with a real browser, as a person would see it: headless Chromium driven by Selenium
/// (`Fixtures/browser_login.py`) logs in at the server's page and is redirected to tokenrelay's
/// loopback listener; the test reads the page tokenrelay answered and keeps a screenshot of it
/// under `.build/login-screenshots/`.
@Suite(.serialized) struct InteropBrowserLoginTests {
    static func browser(_ stack: InteropStack, url: String, name: String, deny: Bool) async throws -> JSONValue {
        let root = InteropStack.repositoryRoot
        let directory = root.appendingPathComponent(".build/login-screenshots")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let screenshot = directory.appendingPathComponent("\(name).png").path
        let script = root.appendingPathComponent("Tests/EndToEndTests/Fixtures/browser_login.py").path
        let python = root.appendingPathComponent(".venv/bin/python").path
        let result = try await InteropStack.run(
            python, [script, url, screenshot] + (deny ? ["--deny"] : []), in: stack.stateDirectory,
            timeout: .seconds(180))
        guard result.status == 0 else {
            throw InteropStack.Failure(description: "browser_login.py failed: \(result.stderr.suffix(2000))")
        }
        #expect(FileManager.default.fileExists(atPath: screenshot))
        return try JSONParser.parse(result.stdout)
    }

    @Test func aPersonLogsInWithARealBrowserAndSeesThatItWorked() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", InteropLoginTests.publicClient(stack))])
            let params = try await InteropLoginTests.startLogin(relay, profile: "me")
            let page = try await Self.browser(
                stack, url: params["url"]?.stringValue ?? "", name: "login-succeeded", deny: false)
            #expect(page["title"]?.stringValue == "Login succeeded", "\(page.jsonText)")
            #expect(page["text"]?.stringValue?.contains("You can close this window") == true)
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["subject"]?.stringValue == "1", "\(answer.jsonText)")
            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["json"]?["username"]?.stringValue == "alice")
            if let line = relay.stderrText.split(separator: "\n").first(where: {
                $0.contains("after the browser's callback")
            }) {
                print("browser login: \(line)")
            }
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func aPersonWhoDeniesSeesWhyAndNothingUnescaped() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [
                    (
                        "consent",
                        [
                            "type: authorization_code", "issuer: \(stack.issuer)", "client_id: cliconsent",
                            "scopes: [read]", "redirect: { path: /cb }",
                        ]
                    )
                ])
            let params = try await InteropLoginTests.startLogin(relay, profile: "consent")
            let page = try await Self.browser(
                stack, url: params["url"]?.stringValue ?? "", name: "login-denied", deny: true)
            #expect(page["url"]?.stringValue?.contains("error=access_denied") == true, "\(page.jsonText)")
            #expect(page["title"]?.stringValue == "Login failed")
            #expect(page["text"]?.stringValue?.contains("access_denied") == true)
            let source = page["source"]?.stringValue ?? ""
            #expect(!source.contains("<script"), "the page runs nothing")
            #expect(source.components(separatedBy: "<").count - 1 == 13, "only the page's own tags: \(source)")
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["error"]?["data"]?["oauthError"]?.stringValue == "access_denied", "\(answer.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }
}

extension RelayProcess {
    /// Polls `status` until the first session is in `state`.
    func waitForSession(state: String, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let session = try await call("status")["result"]?["sessions"]?.arrayValue?.first
            if session?["state"]?.stringValue == state { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw TimedOut(what: "session state \(state)")
    }
}
