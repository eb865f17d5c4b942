import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Logins whose browser is on another machine (SPEC §13.2) against the real authorization server:
/// the person pastes the URL the browser was redirected to (`login-complete`, `tokenrelay login
/// --paste`). Every pasted URL is checked as a callback is, accepted once, and nothing is ever
/// exchanged twice: the server's count of issued tokens says so.
@Suite(.serialized) struct InteropPasteLoginTests {
    /// The redirect the authorization server sent the browser to, not delivered to the listener.
    static func redirected(_ stack: InteropStack, _ url: String) async throws -> String {
        let answer = try await InteropLoginTests.agent(stack, ["browser", url, "--no-deliver"])
        return try #require(answer["location"]?.stringValue)
    }

    /// `location` with its query member `name` replaced by (or, when absent, given) `value`.
    static func replacing(_ name: String, with value: String, in location: String) throws -> String {
        var parts = try #require(URLComponents(string: location))
        var items = (parts.queryItems ?? []).filter { $0.name != name }
        items.append(URLQueryItem(name: name, value: value))
        parts.queryItems = items
        return try #require(parts.string)
    }

    /// Sends `login` and waits for its own `auth-prompt` (the `prompts`-th plus one).
    static func startLogin(_ relay: RelayProcess, id: String, prompts: Int) async throws -> JSONValue {
        try relay.send(#"{"jsonrpc":"2.0","id":"\#(id)","method":"login","params":{"profile":"me"}}"#)
        var wanted = 1
        while true {
            let lines = try await relay.lines(atLeast: wanted)
            let shown = lines.filter { $0["method"]?.stringValue == "auth-prompt" }
            if shown.count > prompts, let last = shown.last { return last["params"] ?? .null }
            wanted = lines.count + 1
        }
    }

    static func paste(_ relay: RelayProcess, _ url: String) async throws -> JSONValue {
        try await relay.call("login-complete", ["profile": "me", "url": .string(url)], timeout: .seconds(60))
    }

    @Test func aPastedURLIsCheckedAsACallbackAndExchangedOnce() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(profiles: [("me", InteropLoginTests.publicClient(stack, scopes: "[read]"))]
            )
            let prompt = try await InteropLoginTests.startLogin(relay, profile: "me")
            let location = try await Self.redirected(stack, prompt["url"]?.stringValue ?? "")

            // Refused, the login going on: the wrong state, another issuer, another address, no code.
            let refusals = [
                try Self.replacing("state", with: "not-the-state", in: location),
                try Self.replacing("iss", with: "https://attacker.example", in: location),
                location.replacingOccurrences(of: "/cb?", with: "/elsewhere?"),
                "http://127.0.0.1:1/cb?" + (URLComponents(string: location)?.percentEncodedQuery ?? ""),
                "https://attacker.example/cb?code=x&state=y",
            ]
            for refused in refusals {
                let answer = try await Self.paste(relay, refused)
                #expect(answer["error"]?["data"]?["kind"]?.stringValue == "invalid_params", "\(answer.jsonText)")
            }
            #expect(try await stack.issuedCount(client: "cli") == 0)

            // The right URL (with surrounding blanks, as pasted): accepted once, and the login answers.
            let accepted = try await Self.paste(relay, "  \(location) \n")
            #expect(accepted["result"]?["accepted"]?.boolValue == true, "\(accepted.jsonText)")
            let answer = try await relay.answer(id: "login-1")
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            // Pasted twice: refused, nothing exchanged again.
            let again = try await Self.paste(relay, location)
            #expect(again["error"]?["data"]?["kind"]?.stringValue == "invalid_params", "\(again.jsonText)")
            #expect(try await stack.issuedCount(client: "cli") == 1)
            let whoami = try await relay.call("request", ["path": "/whoami"])
            #expect(whoami["result"]?["status"]?.intValue == 200, "\(whoami.jsonText)")

            // The listener first, then the paste of the same redirect: harmless.
            _ = try await relay.call("logout", ["profile": "me"])
            let second = try await Self.startLogin(relay, id: "login-2", prompts: 1)
            let delivered = try await InteropLoginTests.agent(stack, ["browser", second["url"]?.stringValue ?? ""])
            #expect(delivered["status"]?.intValue == 200, "\(delivered.jsonText)")
            #expect(try await relay.answer(id: "login-2")["result"]?["loggedIn"]?.boolValue == true)
            let late = try await Self.paste(relay, try #require(delivered["location"]?.stringValue))
            #expect(late["error"]?["data"]?["kind"]?.stringValue == "invalid_params", "\(late.jsonText)")
            #expect(try await stack.issuedCount(client: "cli") == 2)

            // The person denied: the pasted error ends the login as the callback's would.
            _ = try await relay.call("logout", ["profile": "me"])
            let third = try await Self.startLogin(relay, id: "login-3", prompts: 2)
            // (This client needs no consent, so the server's denial is written as it would redirect it.)
            let asked = try #require(URLComponents(string: third["url"]?.stringValue ?? ""))
            let redirectURI = try #require(asked.queryItems?.first { $0.name == "redirect_uri" }?.value)
            let state = try #require(asked.queryItems?.first { $0.name == "state" }?.value)
            let denied = "\(redirectURI)?error=access_denied&error_description=denied&state=\(state)"
            #expect(try await Self.paste(relay, denied)["result"]?["accepted"]?.boolValue == true)
            let refused = try await relay.answer(id: "login-3")
            #expect(refused["error"]?["data"]?["kind"]?.stringValue == "auth", "\(refused.jsonText)")
            #expect(refused["error"]?["data"]?["oauthError"]?.stringValue == "access_denied")
            #expect(try await stack.issuedCount(client: "cli") == 2)

            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            try await InteropSessionEventsTests.expectNoTokens(stack, in: [relay.stdoutText, relay.stderrText])
        }
    }

    @Test func tokenrelayLoginPasteTakesTheURLOnStdin() async throws {
        try await InteropStack.with { stack in
            let state = try InteropSharedStoreTests.sharedStateHome(stack)
            let config = try stack.writeConfig(
                profiles: [("me", InteropLoginTests.publicClient(stack, scopes: "[read]"))])
            let process = try RelayProcess(
                ["login", "--paste", "--config", config], environment: ["XDG_STATE_HOME": state], testMethods: false)
            let line = try await process.stderrLine(containing: "/authorize/?")
            let url = try #require(line.split(separator: " ").last.map(String.init))
            try await process.waitForStderr("paste that page's whole URL")
            let location = try await Self.redirected(stack, url)
            try process.write("http://127.0.0.1:1/cb?code=nope&state=nope\n")
            try await process.waitForStderr("paste the whole URL again")
            try process.write(location + "\n")
            let exit: Int32
            do {
                exit = try await process.exitCode()
            } catch {
                Issue.record("no exit: \(process.stderrText)")
                throw error
            }
            #expect(exit == 0, "\(process.stderrText)")
            #expect(process.stderrText.contains("the pasted URL was accepted"))
            #expect(process.stderrText.contains("logged in"))
            #expect(try await stack.issuedCount(client: "cli") == 1)
            let (code, status) = try await InteropSharedStoreTests.run(
                ["status", "--json", "--config", config], environment: ["XDG_STATE_HOME": state])
            #expect(code == 0)
            let session = try JSONParser.parse(status.stdoutText)["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "valid", "\(status.stdoutText)")
            try await InteropSessionEventsTests.expectNoTokens(
                stack, in: [process.stdoutText, process.stderrText, status.stdoutText, status.stderrText])
        }
    }
}
