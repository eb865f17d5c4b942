import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Several tokenrelay processes on one SQLite session store against the real authorization
/// server (Django OAuth Toolkit, rotation and reuse protection on): one token for a shell loop,
/// one renewal at a time across editor windows, dead lease holders taken over, logout seen
/// everywhere (SPEC §5.6).
@Suite(.serialized) struct InteropSharedStoreTests {
    /// A private `XDG_STATE_HOME` the processes of one test share.
    static func sharedStateHome(_ stack: InteropStack) throws -> String {
        let path = stack.stateDirectory.appendingPathComponent("xdg-state-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path
    }

    /// Runs `tokenrelay ARGUMENTS` to its end; returns the exit code and the process.
    static func run(_ arguments: [String], environment: [String: String]) async throws -> (Int32, RelayProcess) {
        let process = try RelayProcess(arguments, environment: environment, testMethods: false)
        try process.closeStdin()
        return (try await process.exitCode(timeout: .seconds(120)), process)
    }

    static func seededProfile(_ stack: InteropStack) -> [String] {
        [
            "type: refresh_token", "client_id: pwd", "issuer: \(stack.issuer)", "client_secret: { env: SECRET }",
            "client_auth: client_secret_basic", "refresh_token: { env: SEED }",
        ]
    }

    @Test func aHundredSequentialCallsShareOneToken() async throws {
        try await InteropStack.with { stack in
            let state = try Self.sharedStateHome(stack)
            let config = try stack.writeConfig(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))])
            let environment = ["SECRET": "svc-secret", "XDG_STATE_HOME": state]
            for index in 0..<100 {
                let (code, process) = try await Self.run(
                    ["call", "GET", "/whoami", "--config", config], environment: environment)
                #expect(code == 0, "call \(index): \(process.stderrText)")
                if code != 0 { break }
                #expect(process.stdoutText.contains("\"client_id\""))
            }
            #expect(try await stack.issuedCount(client: "svc") == 1)
            let (code, status) = try await Self.run(["status", "--config", config, "--json"], environment: environment)
            #expect(code == 0, "\(status.stderrText)")
            let result = try JSONParser.parse(status.stdoutText)
            #expect(result["store"]?["type"]?.stringValue == "sqlite")
            #expect(result["store"]?["path"]?.stringValue == state + "/tokenrelay/sessions.db")
            #expect(result["store"]?["encrypted"]?.boolValue == false)
            #expect(result["store"]?["schemaVersion"]?.intValue == 5)
            let session = result["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "valid", "\(result.jsonText)")
            #expect(session?["fromStore"]?.boolValue == true)
        }
    }

    @Test func fourServersForcingFiftyRenewalsEachNeverReplayARotatedToken() async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            let relays = try (0..<4).map { _ in
                try RelayProcess(
                    ["--config", config, "--log-level", "info"], environment: environment, testMethods: false)
            }
            let rounds = 50
            // The AS revokes an access token when its refresh token is used, so a request in flight
            // while another process renews is answered 401 and replayed once with the new token
            // (SPEC §5.3). Its replay can be overtaken the same way by the next process's forced
            // renewal: then the 401 is the answer (one replay, never a loop). Every request is 200
            // or exactly that: seen twice by the RS, both times refused.
            let overtaken = try await withThrowingTaskGroup(of: Int.self) { group in
                for (index, relay) in relays.enumerated() {
                    group.addTask {
                        var overtaken = 0
                        for round in 0..<rounds {
                            let invalidated = try await relay.call("token-invalidate", ["profile": "seeded"])
                            #expect(invalidated["error"] == nil, "\(invalidated.jsonText)")
                            let tag = "relay\(index)-round\(round)-\(UUID().uuidString.prefix(8))"
                            let answer = try await relay.call(
                                "request", ["path": "/whoami", "headers": ["X-Request-Tag": .string(tag)]])
                            let status = answer["result"]?["status"]?.intValue
                            if status == 401 {
                                #expect(try await stack.received(tag: tag) == 2, "round \(round): replayed once")
                                overtaken += 1
                            } else {
                                #expect(status == 200, "round \(round): \(answer.jsonText)")
                            }
                        }
                        return overtaken
                    }
                }
                return try await group.reduce(0, +)
            }
            var reported = 0
            for relay in relays {
                let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
                reported += (session?["counters"]?["renewals"]?.intValue ?? 0)
                reported += (session?["counters"]?["acquisitions"]?.intValue ?? 0)
                #expect(session?["lastError"] == nil, "\(session?.jsonText ?? "")")
            }
            // The family is alive: a last forced renewal still works.
            _ = try await relays[0].call("token-invalidate", ["profile": "seeded"])
            let last = try await relays[0].call("request", ["path": "/whoami"])
            #expect(last["result"]?["status"]?.intValue == 200, "\(last.jsonText)")
            reported += 1
            for relay in relays {
                try relay.closeStdin()
                #expect(try await relay.exitCode() == 0)
                #expect(!relay.stdoutText.contains("invalid_grant"))
                #expect(!relay.stderrText.contains("invalid_grant"))
            }
            // Every refresh at the server (all refresh tokens but the minted seed) is a renewal a
            // process reported, and nobody renewed what another process had just renewed.
            let refreshes = try await stack.issuedCount(client: "pwd", kind: "refresh") - 1
            print(
                "shared store: 4 processes x \(rounds) forced renewals -> \(refreshes) refreshes at the server, \(reported) reported, \(overtaken) replays overtaken by another renewal"
            )
            #expect(refreshes == reported)
            #expect(refreshes >= rounds)
        }
    }

    @Test func aLeaseHolderKilledBeforeItSendsIsTakenOver() async throws {
        try await InteropStack.with { stack in
            let state = try Self.sharedStateHome(stack)
            let gate = stack.stateDirectory.appendingPathComponent("lease-gate").path
            #expect(mkfifo(gate, 0o600) == 0)
            let config = try stack.writeConfig(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))])
            let environment = ["SECRET": "svc-secret", "XDG_STATE_HOME": state]
            var gated = environment
            gated["TOKENRELAY_ENABLE_TEST_METHODS"] = "1"
            gated["TOKENRELAY_TEST_LEASE_GATE"] = gate
            let holder = try RelayProcess(["--config", config, "--log-level", "debug"], environment: gated)
            let other = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            try holder.send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/whoami"}}"#)
            try await holder.waitForStderr("test lease gate: holding the lease")
            // Callers of another process wait for the lease while its holder lives...
            for id in 0..<3 {
                try other.send(#"{"jsonrpc":"2.0","id":"w\#(id)","method":"request","params":{"path":"/whoami"}}"#)
            }
            holder.signal(SIGKILL)
            // ...and once it is dead, the lease is taken over and every caller gets a token.
            for id in 0..<3 {
                let answer = try await other.answer(id: "w\(id)")
                #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            }
            #expect(try await stack.issuedCount(client: "svc") == 1)
            #expect(other.stderrText.contains("taking over the lease"))
            try other.closeStdin()
            #expect(try await other.exitCode() == 0)
        }
    }

    @Test func aHolderKilledWhileItsRefreshIsInFlightIsTakenOverAndTheFamilyLives() async throws {
        try await InteropStack.with(.init(reuseProtection: true, refreshGrace: 30, tokenGate: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            let holder = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            let other = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            #expect(try await holder.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            let refreshesBefore = try await stack.issuedCount(client: "pwd", kind: "refresh")
            try stack.armTokenGate()
            _ = try await holder.call("token-invalidate", ["profile": "seeded"])
            try holder.send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/whoami"}}"#)
            try await stack.waitFor("the holder's refresh at the token endpoint") { stack.arrivedAtTokenGate() == 1 }
            holder.signal(SIGKILL)
            try stack.releaseTokenGate()
            // The AS completes the dead holder's refresh: the refresh token in the store is now
            // superseded, and its successor was never stored.
            try await stack.waitFor("the dead holder's rotation") {
                try await stack.issuedCount(client: "pwd", kind: "refresh") == refreshesBefore + 1
            }
            // Another process takes the lease over and replays the stored token within the grace
            // period: the AS answers with the successor, every caller gets a token.
            for id in 0..<3 {
                try other.send(#"{"jsonrpc":"2.0","id":"w\#(id)","method":"request","params":{"path":"/whoami"}}"#)
            }
            for id in 0..<3 {
                let answer = try await other.answer(id: "w\(id)")
                #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            }
            #expect(other.stderrText.contains("taking over the lease"))
            // The family is alive: the next rotation works.
            _ = try await other.call("token-invalidate", ["profile": "seeded"])
            let next = try await other.call("request", ["path": "/whoami"])
            #expect(next["result"]?["status"]?.intValue == 200, "\(next.jsonText)")
            try other.closeStdin()
            #expect(try await other.exitCode() == 0)
            #expect(!other.stderrText.contains("invalid_grant"))
        }
    }

    /// A request waiting on the session's refresh when `logout` lands is answered `logged_out`
    /// (SPEC §7), not `-32800 cancelled` as before issue 12: nothing cancelled it.
    @Test func aLogoutEndsARequestWaitingOnItsRefreshWithLoggedOutNotCancelled() async throws {
        try await InteropStack.with(.init(reuseProtection: true, tokenGate: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            let relay = try RelayProcess(["--config", config], environment: environment, testMethods: false)
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            try stack.armTokenGate()
            _ = try await relay.call("token-invalidate", ["profile": "seeded"])
            try relay.send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/whoami"}}"#)
            try await stack.waitFor("the refresh at the token endpoint") { stack.arrivedAtTokenGate() == 1 }
            let loggedOut = try await relay.call("logout", ["profile": "seeded"])
            #expect(loggedOut["result"]?["loggedOut"]?.intValue == 1, "\(loggedOut.jsonText)")
            try stack.releaseTokenGate()
            let held = try await relay.answer(id: "held")
            #expect(held["error"]?["data"]?["kind"] == "logged_out", "\(held.jsonText)")
            #expect(held["error"]?["code"] == .int(-32032))
            // Nothing was committed: the session stays logged out.
            let status = try await relay.call("status")
            let session = status["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["state"] != "valid", "\(status.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func aRefreshTokenProfileRestartedTenTimesSendsItsSeedOnce() async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            for restart in 0..<10 {
                let relay = try RelayProcess(["--config", config], environment: environment, testMethods: false)
                if restart > 0 {
                    // Force a refresh in every process: it must use the stored, rotated token. The
                    // invalidation is recorded in the store though this process never used the
                    // session yet (it counts the stored session).
                    let invalidated = try await relay.call("token-invalidate", ["profile": "seeded"])
                    #expect(invalidated["result"]?["invalidated"]?.intValue == 1, "\(invalidated.jsonText)")
                }
                let answer = try await relay.call("request", ["path": "/whoami"])
                #expect(answer["result"]?["status"]?.intValue == 200, "restart \(restart): \(answer.jsonText)")
                try relay.closeStdin()
                #expect(try await relay.exitCode() == 0)
                #expect(!relay.stderrText.contains("invalid_grant"))
            }
            // The seed plus one rotation per process: the seed itself was redeemed once (a replay
            // would have revoked the family and failed every later request).
            #expect(try await stack.issuedCount(client: "pwd", kind: "refresh") == 1 + 10)
        }
    }

    @Test func logoutInOneProcessMakesAnotherOneNeedANewToken() async throws {
        try await InteropStack.with { stack in
            let state = try Self.sharedStateHome(stack)
            let config = try stack.writeConfig(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))])
            let environment = ["SECRET": "svc-secret", "XDG_STATE_HOME": state]
            let editor = try RelayProcess(["--config", config], environment: environment, testMethods: false)
            #expect(try await editor.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "svc") == 1)
            let (code, logout) = try await Self.run(["logout", "--config", config], environment: environment)
            #expect(code == 0, "\(logout.stderrText)")
            #expect(logout.stderrText.contains("logged out 1 session"))
            #expect(try await editor.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "svc") == 2)
            try editor.closeStdin()
            #expect(try await editor.exitCode() == 0)
        }
    }

    @Test func invalidateAndLogoutInAProcessThatNeverUsedTheSessionAreSeenByTheOthers() async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            let editor = try RelayProcess(["--config", config], environment: environment, testMethods: false)
            #expect(try await editor.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "pwd", kind: "refresh") == 1 + 1)
            // A fresh process (its session's store key needs the seed; its store is not open yet).
            let other = try RelayProcess(["--config", config], environment: environment, testMethods: false)
            let invalidated = try await other.call("token-invalidate", ["environment": "interop"])
            #expect(invalidated["result"]?["invalidated"]?.intValue == 1, "\(invalidated.jsonText)")
            // The editor renews on its next request (its held token was invalidated elsewhere).
            #expect(try await editor.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "pwd", kind: "refresh") == 1 + 2)
            // Logout from another fresh process: the editor's session is gone too (its seed is spent,
            // so it needs a new one), and nothing is sent to the token endpoint for it.
            let (code, logout) = try await Self.run(["logout", "--config", config], environment: environment)
            #expect(code == 0, "\(logout.stderrText)")
            #expect(logout.stderrText.contains("logged out 1 session"))
            let after = try await editor.call("request", ["path": "/whoami"])
            #expect(after["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(after.jsonText)")
            #expect(try await stack.issuedCount(client: "pwd", kind: "refresh") == 1 + 2)
            for relay in [editor, other] {
                try relay.closeStdin()
                #expect(try await relay.exitCode() == 0)
            }
        }
    }

    @Test func aRefreshAnsweredAfterALogoutElsewhereDoesNotBringTheSessionBack() async throws {
        try await InteropStack.with(.init(reuseProtection: true, tokenGate: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(profiles: [("seeded", Self.seededProfile(stack))])
            let environment = ["SECRET": "pwd-secret", "SEED": seed, "XDG_STATE_HOME": state]
            let editor = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
            #expect(try await editor.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            // The editor's refresh is handled (rotated) at the server; its answer is held...
            try stack.armTokenGate(holdingResponses: true)
            _ = try await editor.call("token-invalidate", ["profile": "seeded"])
            try editor.send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/whoami"}}"#)
            try await stack.waitFor("the editor's refresh handled at the server") { stack.arrivedAtTokenGate() == 1 }
            // ...while another process logs the session out.
            let (code, logout) = try await Self.run(["logout", "--config", config], environment: environment)
            #expect(code == 0, "\(logout.stderrText)")
            try stack.releaseTokenGate()
            let held = try await editor.answer(id: "held")
            #expect(held["error"]?["data"]?["kind"]?.stringValue == "logged_out", "\(held.jsonText)")
            // Nothing came back: not in the store, not in the editor.
            let (statusCode, status) = try await Self.run(
                ["status", "--config", config, "--json"], environment: environment)
            #expect(statusCode == 0, "\(status.stderrText)")
            let session = try JSONParser.parse(status.stdoutText)["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue != "valid", "\(session?.jsonText ?? "")")
            #expect(session?["fromStore"]?.boolValue != true)
            #expect(session?["refreshable"]?.boolValue == false)
            let after = try await editor.call("request", ["path": "/whoami"])
            #expect(after["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(after.jsonText)")
            #expect(editor.stderrText.contains("was logged out in another process"))
            try editor.closeStdin()
            #expect(try await editor.exitCode() == 0)
        }
    }

    @Test func aSealedStoreHoldsNoTokenInAnyEncoding() async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let state = try Self.sharedStateHome(stack)
            let seed = try await stack.mintRefreshToken()
            let config = try stack.writeConfig(
                profiles: [
                    ("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET")),
                    ("seeded", Self.seededProfile(stack).map { $0.replacingOccurrences(of: "SECRET", with: "PWD") }),
                ],
                store: "{ encryption_key: { env: STORE_KEY } }")
            let (keyCode, newKey) = try await Self.run(["store", "new-key"], environment: [:])
            #expect(keyCode == 0)
            let key = newKey.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            let environment = [
                "SECRET": "svc-secret", "PWD": "pwd-secret", "SEED": seed, "STORE_KEY": key, "XDG_STATE_HOME": state,
            ]
            for profile in ["service", "seeded", "seeded"] {
                let (code, call) = try await Self.run(
                    ["call", "GET", "/whoami", "--config", config, "--profile", profile], environment: environment)
                #expect(code == 0, "\(call.stderrText)")
            }
            let (statusCode, status) = try await Self.run(["status", "--config", config], environment: environment)
            #expect(statusCode == 0)
            #expect(status.stdoutText.contains("(sealed with store.encryption_key, schema 5)"), "\(status.stdoutText)")
            // The wrong key is a config error naming the store, and changes nothing.
            var wrong = environment
            wrong["STORE_KEY"] = String(repeating: "00", count: 32)
            let (wrongCode, refused) = try await Self.run(
                ["call", "GET", "/whoami", "--config", config], environment: wrong)
            #expect(wrongCode == 3, "\(refused.stderrText)")
            #expect(
                refused.stderrText.contains(
                    "the encryption key does not open the store \(state)/tokenrelay/sessions.db"))

            let values = try await stack.issuedValues()
            #expect(values.count >= 4)
            var bytes = Data()
            for suffix in ["", "-wal", "-shm"] {
                bytes += FileManager.default.contents(atPath: state + "/tokenrelay/sessions.db" + suffix) ?? Data()
            }
            for value in values + [seed] {
                let hex = Array(value.utf8).map { String(format: "%02x", $0) }.joined()
                for encoding in [value, Data(value.utf8).base64EncodedString(), hex, hex.uppercased()] {
                    #expect(bytes.range(of: Data(encoding.utf8)) == nil, "a token is in the store file")
                }
            }
        }
    }
}
