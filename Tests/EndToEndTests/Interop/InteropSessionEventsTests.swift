import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Session events (SPEC §13.1) against the real authorization server: a `serve` that watches its
/// sessions is told, once each, what other processes sharing its store do (a `tokenrelay call`,
/// `invalidate`, `logout`, `login`, a refused refresh) and what it does itself; never a token.
@Suite(.serialized) struct InteropSessionEventsTests {
    /// The `session-changed` params received so far, once at least `count` arrived.
    static func changes(_ relay: RelayProcess, atLeast count: Int, shell: Bool = false) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + .seconds(120)
        var wanted = 1
        while true {
            let lines: [JSONValue]
            do {
                lines = try await relay.lines(
                    atLeast: wanted, timeout: max(deadline - ContinuousClock.now, .milliseconds(1)))
            } catch {
                throw RelayProcess.TimedOut(
                    what:
                        "\(count) session-changed; stdout: \(relay.stdoutText)\nstderr: \(relay.stderrText.suffix(6000))"
                )
            }
            // A serve's notifications, or (`status --watch --json`) every line after the first.
            let changes =
                shell
                ? Array(lines.dropFirst())
                : lines.filter { $0["method"]?.stringValue == "session-changed" }.map { $0["params"] ?? .null }
            if changes.count >= count { return changes }
            guard ContinuousClock.now < deadline, lines.count >= wanted else {
                throw RelayProcess.TimedOut(what: "\(count) session-changed (got \(changes.count))")
            }
            wanted = lines.count + 1
        }
    }

    static func reasons(_ changes: [JSONValue]) -> [String] { changes.compactMap { $0["reason"]?.stringValue } }

    /// Every issued token value is absent from every output.
    static func expectNoTokens(_ stack: InteropStack, in outputs: [String]) async throws {
        let issued = try await stack.issuedValues()
        #expect(!issued.isEmpty)
        for token in issued {
            for output in outputs { #expect(!output.contains(token), "an issued token reached an output") }
        }
    }

    @Test func changesMadeByOtherProcessesAreToldOnceEach() async throws {
        try await InteropStack.with { stack in
            let state = try InteropSharedStoreTests.sharedStateHome(stack)
            let config = try stack.writeConfig(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))])
            let environment = ["SECRET": "svc-secret", "XDG_STATE_HOME": state]
            let watcher = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            let watched = try await watcher.call("watch-sessions")
            let now = watched["result"]?["sessions"]?.arrayValue
            #expect(now?.count == 1 && now?.first?["state"]?.stringValue == "none", "\(watched.jsonText)")
            // A third process: `tokenrelay status --watch --json`, its baseline first.
            let shell = try RelayProcess(
                ["status", "--watch", "--json", "--config", config], environment: environment,
                testMethods: false)
            let baseline = try await shell.lines(atLeast: 1)
            #expect(baseline.first?["sessions"]?.arrayValue?.first?["state"]?.stringValue == "none")

            var outputs: [String] = []
            func run(_ arguments: [String]) async throws {
                let (code, process) = try await InteropSharedStoreTests.run(
                    arguments + ["--config", config], environment: environment)
                #expect(code == 0, "\(arguments): \(process.stderrText)")
                outputs += [process.stdoutText, process.stderrText]
            }
            try await run(["call", "GET", "/whoami"])
            #expect(Self.reasons(try await Self.changes(watcher, atLeast: 1)) == ["valid"])
            try await run(["invalidate"])
            #expect(Self.reasons(try await Self.changes(watcher, atLeast: 2)) == ["valid", "invalidated"])
            try await run(["logout"])
            try await run(["call", "GET", "/whoami"])
            let changes = try await Self.changes(watcher, atLeast: 4)
            #expect(Self.reasons(changes) == ["valid", "invalidated", "logged-out", "valid"], "\(changes)")
            #expect(changes.map { $0["state"]?.stringValue } == ["valid", "expired", "none", "valid"])
            #expect(changes.allSatisfy { $0["environment"]?.stringValue == "interop" })
            #expect(changes[0]["expiresAt"]?.stringValue != nil)
            #expect(try await stack.issuedCount(client: "svc") == 2)
            // Known issue (issue 48, open): `status --watch` sometimes misses the first change another
            // process makes (seen: invalidated, logged-out, valid told, the first valid not), in about
            // one run in three; `serve`'s watch above is not affected. Not understood yet.
            await withKnownIssue("status --watch sometimes misses other processes' changes", isIntermittent: true) {
                let printed = try await Self.changes(shell, atLeast: 4, shell: true)
                #expect(Self.reasons(printed) == ["valid", "invalidated", "logged-out", "valid"], "\(printed)")
            }
            shell.signal(SIGINT)
            #expect(try await shell.exitCode() == 0, "\(shell.stderrText)")
            outputs += [shell.stdoutText, shell.stderrText]

            // A change the watcher makes itself is told too, once.
            _ = try await watcher.call("token-invalidate", ["profile": "service"])
            #expect(Self.reasons(try await Self.changes(watcher, atLeast: 5)).last == "invalidated")
            let unwatched = try await watcher.call("unwatch-sessions")
            #expect(unwatched["result"]?["unwatched"]?.boolValue == true, "\(unwatched.jsonText)")
            try watcher.closeStdin()
            #expect(try await watcher.exitCode() == 0)
            #expect(Self.reasons(try await Self.changes(watcher, atLeast: 5)).count == 5)
            try await Self.expectNoTokens(stack, in: outputs + [watcher.stdoutText, watcher.stderrText])
        }
    }

    @Test func aLoginAndARefusedRefreshElsewhereAndALoginHereAreTold() async throws {
        try await InteropStack.with { stack in
            let state = try InteropSharedStoreTests.sharedStateHome(stack)
            let config = try stack.writeConfig(
                profiles: [("me", InteropLoginTests.publicClient(stack, scopes: "[read]"))])
            let environment = ["XDG_STATE_HOME": state]
            let watcher = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            let watched = try await watcher.call("watch-sessions", ["profile": "me"])
            #expect(watched["result"]?["sessions"]?.arrayValue?.count == 1, "\(watched.jsonText)")
            var outputs: [String] = []

            // A `tokenrelay login` in a second process.
            let login = try RelayProcess(["login", "--config", config], environment: environment, testMethods: false)
            let line = try await login.stderrLine(containing: "/authorize/?")
            let url = try #require(line.split(separator: " ").last.map(String.init))
            _ = try await InteropLoginTests.agent(stack, ["browser", url])
            #expect(try await login.exitCode() == 0, "\(login.stderrText)")
            outputs += [login.stdoutText, login.stderrText]
            let loggedIn = try await Self.changes(watcher, atLeast: 1)
            #expect(Self.reasons(loggedIn) == ["logged-in"], "\(loggedIn)")
            #expect(loggedIn.first?["state"]?.stringValue == "valid")

            // A refresh refused in a third and fourth process.
            let refresh = try #require(try await stack.issuedValues(client: "cli", kind: "refresh").last)
            try await stack.revoke(refresh, hint: "refresh_token", client: "cli", secret: nil)
            for (index, arguments) in [["invalidate"], ["call", "GET", "/whoami"]].enumerated() {
                let (_, process) = try await InteropSharedStoreTests.run(
                    arguments + ["--config", config], environment: environment)
                outputs += [process.stdoutText, process.stderrText]
                // Told before the next process runs (changes between two looks add up to one).
                _ = try await Self.changes(watcher, atLeast: 2 + index)
            }
            let refused = try await Self.changes(watcher, atLeast: 3)
            #expect(Self.reasons(refused) == ["logged-in", "invalidated", "refresh-failed"], "\(refused)")

            // The watcher's own login: login-required with what the person must do, then logged-in.
            try watcher.send(#"{"jsonrpc":"2.0","id":"login-1","method":"login","params":{"profile":"me"}}"#)
            let prompted = try await Self.changes(watcher, atLeast: 4)
            let required = try #require(prompted.last)
            #expect(required["reason"]?.stringValue == "login-required", "\(required)")
            let shown = try #require(required["login"]?["url"]?.stringValue)
            #expect(shown.hasPrefix(stack.issuer + "/authorize/?"))
            #expect(required["login"]?["expiresAt"]?.stringValue != nil)
            _ = try await InteropLoginTests.agent(stack, ["browser", shown])
            let answer = try await watcher.answer(id: "login-1")
            #expect(answer["result"]?["loggedIn"]?.boolValue == true, "\(answer.jsonText)")
            let all = try await Self.changes(watcher, atLeast: 5)
            #expect(
                Self.reasons(all) == ["logged-in", "invalidated", "refresh-failed", "login-required", "logged-in"],
                "\(all)")
            try watcher.closeStdin()
            #expect(try await watcher.exitCode() == 0)
            #expect(Self.reasons(try await Self.changes(watcher, atLeast: 5)).count == 5)
            try await Self.expectNoTokens(stack, in: outputs + [watcher.stdoutText, watcher.stderrText])
        }
    }
}
