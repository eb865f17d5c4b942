import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `config-reload` and SIGHUP through the real binary (SPEC §5.7), against the recording server
/// and the interop stack (a real authorization server, whose token ledger shows which tokens
/// were issued). Every wait is on a line, a log record or a server count; no sleeps.
@Suite(.serialized) struct ReloadEndToEndTests {
    /// A config file the test rewrites in place between reloads.
    struct ConfigFile {
        let path: String
        init(_ text: String) throws {
            let directory = try TemporaryDirectory.make()
            path = directory.appendingPathComponent("config.yaml").path
            try write(text)
        }
        func write(_ text: String) throws { try text.write(toFile: path, atomically: true, encoding: .utf8) }
    }

    static func apiKeyProfile(_ name: String, variable: String = "KEY") -> String {
        """
              \(name):
                type: api_key
                header: X-Key
                value: { env: \(variable) }
        """
    }

    static func recordingConfig(_ server: RecordingServer, profiles: [String], store: String = "{ type: memory }")
        -> String
    {
        """
        version: 1
        store: \(store)
        environments:
          rec:
            base_url: \(server.origin)
            default_profile: \(profiles.first ?? "none")
            profiles:
        \(profiles.map { apiKeyProfile($0) }.joined(separator: "\n"))
        """
    }

    static func interopConfig(_ stack: InteropStack, profiles: [(name: String, lines: [String])], extra: String = "")
        -> String
    {
        var text = """
            version: 1
            store: { type: memory }
            default_environment: interop
            environments:
              interop:
                base_url: \(stack.rsURL)
                default_profile: \(profiles.first?.name ?? "none")
                profiles:

            """
        for profile in profiles {
            text += "      \(profile.name):\n"
            for line in profile.lines { text += "        \(line)\n" }
        }
        return text + extra
    }

    static func entries(_ value: JSONValue?) -> [String] {
        guard case .array(let items)? = value else { return [] }
        return items.map { item in
            [item["environment"]?.stringValue, item["profile"]?.stringValue].compactMap { $0 }.joined(separator: "/")
        }
    }

    @Test func reloadWhileAHundredRequestsAndTenSubscriptionsAreInFlightFailsNone() async throws {
        try await InteropStack.with { stack in
            let server = try await RecordingServer()
            let service = ("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))
            // The "gone" environment is removed by the reload: its transport is shut down only after
            // its last in-flight request.
            let kept = """
                  rec:
                    base_url: \(server.origin)
                    default_profile: keep
                    profiles:
                \(Self.apiKeyProfile("keep"))

                """
            let gone = """
                  gone:
                    base_url: \(server.origin)
                    default_profile: gone
                    profiles:
                \(Self.apiKeyProfile("gone"))

                """
            let file = try ConfigFile(Self.interopConfig(stack, profiles: [service], extra: kept + gone))
            let relay = try RelayProcess(
                ["--config", file.path, "--log-level", "info"],
                environment: ["SECRET": "svc-secret", "KEY": "k-secret"])
            var subs: [String] = []
            for _ in 0..<10 { subs.append(try await relay.subscribe(["path": "/events?count=-1&interval=0.1"])) }
            _ = try await relay.waitForLines(what: "2 ticks on each subscription") { lines in
                subs.allSatisfy { lines.ticks(of: $0).count >= 2 }
            }
            // 100 requests held at the server until the test marks "go": 50 on a profile the reload
            // keeps, 50 on an environment it removes.
            var text = ""
            for index in 0..<100 {
                let environment = index % 2 == 0 ? "rec" : "gone"
                let params =
                    #"{"environment":"\#(environment)","path":"/await","query":{"event":"go","timeout":"300"},"timeoutMs":300000}"#
                text += #"{"jsonrpc":"2.0","id":"r\#(index)","method":"request","params":\#(params)}"# + "\n"
            }
            try relay.write(text)
            try await stack.waitFor("100 requests held at the server") {
                server.logText.split(separator: "\n").filter { $0 == #"{"event": "waiting-go"}"# }.count >= 100
            }

            try file.write(Self.interopConfig(stack, profiles: [service], extra: kept))
            let reload = try await relay.call("config-reload")
            #expect(Self.entries(reload["result"]?["removed"]) == ["gone/gone"], "\(reload.jsonText)")
            #expect(Self.entries(reload["result"]?["changed"]) == [] && Self.entries(reload["result"]?["added"]) == [])
            let ticksAtReload = relay.parsedLines
            let unknown = try await relay.call("request", ["environment": "gone", "path": "/echo"])
            #expect(unknown["error"]?["data"]?["kind"] == "unknown_environment", "\(unknown.jsonText)")

            let marked = try await relay.call(
                "request", ["environment": "rec", "path": "/mark", "query": ["event": "go"]])
            #expect(marked["result"]?["status"] == 200, "\(marked.jsonText)")
            let lines = try await relay.waitForLines(what: "the 100 answers and 3 more ticks per subscription") {
                lines in
                (0..<100).allSatisfy { index in lines.contains { $0["id"]?.stringValue == "r\(index)" } }
                    && subs.allSatisfy { lines.ticks(of: $0).count >= ticksAtReload.ticks(of: $0).count + 3 }
            }
            for index in 0..<100 {
                let answer = lines.first { $0["id"]?.stringValue == "r\(index)" }
                #expect(answer?["result"]?["status"] == 200, "r\(index): \(answer?.jsonText ?? "-")")
            }
            for sub in subs {
                #expect(lines.closedState(of: sub) == nil, "\(sub) keeps streaming")
                let ticks = lines.ticks(of: sub)
                #expect(ticks == Array(1...max(ticks.count, 1)), "\(sub): no gap")
            }
            #expect(try await stack.issuedCount(client: "svc") == 1, "the unchanged session kept its token")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func brokenConfigChangesNothingAndTheErrorHasDiagnostics() async throws {
        let server = try await RecordingServer()
        let file = try ConfigFile(Self.recordingConfig(server, profiles: ["a"]))
        let relay = try RelayProcess(["--config", file.path], environment: ["KEY": "k-secret"])
        #expect(try await relay.call("request", ["path": "/echo"])["result"]?["status"] == 200)
        try file.write(
            Self.recordingConfig(server, profiles: ["a", "b"]).replacingOccurrences(
                of: "type: api_key", with: "type: api-key"))
        let reload = try await relay.call("config-reload")
        #expect(reload["error"]?["data"]?["kind"] == "config", "\(reload.jsonText)")
        guard case .array(let diagnostics)? = reload["error"]?["data"]?["diagnostics"] else {
            Issue.record("no diagnostics: \(reload.jsonText)")
            return
        }
        #expect(!diagnostics.isEmpty)
        #expect(diagnostics.allSatisfy { ($0["line"]?.intValue ?? 0) > 0 && $0["file"]?.stringValue == file.path })
        #expect(diagnostics.contains { $0["message"]?.stringValue?.contains("api-key") == true }, "\(reload.jsonText)")
        // The running configuration is the old one: a still works, b does not exist.
        let a = try await relay.call("request", ["profile": "a", "path": "/echo"])
        #expect(a["result"]?["status"] == 200)
        #expect(try server.last("/echo")?.header("x-key") == ["k-secret"])
        let b = try await relay.call("request", ["profile": "b", "path": "/echo"])
        #expect(b["error"]?["data"]?["kind"] == "unknown_profile", "\(b.jsonText)")
        #expect(!relay.stderrText.contains("k-secret"))
    }

    @Test func removedProfileSubscriptionsEndClosedAndTheOthersKeepStreaming() async throws {
        try await InteropStack.with { stack in
            let service = ("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))
            let other = ("other", stack.clientCredentials(client: "svcpost", secretVariable: "SECRET_POST"))
            let file = try ConfigFile(Self.interopConfig(stack, profiles: [service, other]))
            let relay = try RelayProcess(
                ["--config", file.path], environment: ["SECRET": "svc-secret", "SECRET_POST": "svcpost-secret"])
            let kept = try await relay.subscribe(["profile": "service", "path": "/events?count=-1&interval=0.1"])
            let ended = try await relay.subscribe(["profile": "other", "path": "/events?count=-1&interval=0.1"])
            _ = try await relay.waitForLines(what: "ticks on both") { lines in
                lines.ticks(of: kept).count >= 2 && lines.ticks(of: ended).count >= 2
            }
            try file.write(Self.interopConfig(stack, profiles: [service]))
            let reload = try await relay.call("config-reload")
            #expect(Self.entries(reload["result"]?["removed"]) == ["interop/other"], "\(reload.jsonText)")
            // The removed profile's subscription was closed before the answer.
            let atReload = relay.parsedLines
            #expect(atReload.closedState(of: ended) != nil, "closed before the reload answered")
            let lines = try await relay.waitForLines(what: "3 more ticks on the kept subscription") { lines in
                lines.ticks(of: kept).count >= atReload.ticks(of: kept).count + 3
            }
            #expect(lines.closedState(of: kept) == nil)
            #expect(lines.ticks(of: ended).count == atReload.ticks(of: ended).count, "nothing after closed")
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 1, "\(status.jsonText)")
            let refused = try await relay.call("subscribe", ["profile": "other", "path": "/events"])
            #expect(refused["error"]?["data"]?["kind"] == "unknown_profile", "\(refused.jsonText)")
        }
    }

    @Test func changedSecretSourceStartsAfreshAndAnUnchangedProfileKeepsItsToken() async throws {
        try await InteropStack.with { stack in
            let directory = try TemporaryDirectory.make()
            let first = directory.appendingPathComponent("secret-a").path
            let second = directory.appendingPathComponent("secret-b").path
            try "svc-secret\n".write(toFile: first, atomically: true, encoding: .utf8)
            func service(_ path: String) -> (String, [String]) {
                (
                    "service",
                    stack.clientCredentials(client: "svc", secretVariable: "UNUSED").map {
                        $0.hasPrefix("client_secret:") ? "client_secret: { file: \(path) }" : $0
                    }
                )
            }
            let other = ("other", stack.clientCredentials(client: "svcpost", secretVariable: "SECRET_POST"))
            let file = try ConfigFile(Self.interopConfig(stack, profiles: [service(first), other]))
            let relay = try RelayProcess(["--config", file.path], environment: ["SECRET_POST": "svcpost-secret"])
            for profile in ["service", "other"] {
                let answer = try await relay.call("request", ["profile": .string(profile), "path": "/whoami"])
                #expect(answer["result"]?["status"] == 200, "\(answer.jsonText)")
            }
            #expect(try await stack.issuedCount(client: "svc") == 1)
            #expect(try await stack.issuedCount(client: "svcpost") == 1)

            // The old source now holds a wrong secret: only the new source can get a token.
            try "svc-secret\n".write(toFile: second, atomically: true, encoding: .utf8)
            try "wrong\n".write(toFile: first, atomically: true, encoding: .utf8)
            try file.write(Self.interopConfig(stack, profiles: [service(second), other]))
            let reload = try await relay.call("config-reload")
            #expect(Self.entries(reload["result"]?["changed"]) == ["interop/service"], "\(reload.jsonText)")
            #expect(Self.entries(reload["result"]?["added"]) == [] && Self.entries(reload["result"]?["removed"]) == [])
            for profile in ["service", "other"] {
                let answer = try await relay.call("request", ["profile": .string(profile), "path": "/whoami"])
                #expect(answer["result"]?["status"] == 200, "\(answer.jsonText)")
            }
            #expect(try await stack.issuedCount(client: "svc") == 2, "a new token, acquired with the new secret")
            #expect(try await stack.issuedCount(client: "svcpost") == 1, "the unchanged profile kept its token")
        }
    }

    @Test func sighupReloadsLikeTheMethodAndABrokenConfigOnSighupIsLogged() async throws {
        let server = try await RecordingServer()
        let file = try ConfigFile(Self.recordingConfig(server, profiles: ["a"]))
        let relay = try RelayProcess(["--config", file.path, "--log-level", "info"], environment: ["KEY": "k-secret"])
        #expect(try await relay.call("ping")["result"] != nil)
        try file.write(Self.recordingConfig(server, profiles: ["a", "b"]))
        relay.signal(SIGHUP)
        try await relay.waitForStderr("configuration reloaded: 1 added, 0 changed, 0 removed")
        let b = try await relay.call("request", ["profile": "b", "path": "/echo"])
        #expect(b["result"]?["status"] == 200, "\(b.jsonText)")
        #expect(try server.last("/echo")?.header("x-key") == ["k-secret"])

        try file.write("version: 1\nenvironments: [oops\n")
        relay.signal(SIGHUP)
        try await relay.waitForStderr("reload on SIGHUP failed")
        let still = try await relay.call("request", ["profile": "b", "path": "/echo"])
        #expect(still["result"]?["status"] == 200, "still serving the last good configuration: \(still.jsonText)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    @Test func changedStoreSectionIsRefusedAndNothingElseChanges() async throws {
        let server = try await RecordingServer()
        let file = try ConfigFile(Self.recordingConfig(server, profiles: ["a"]))
        let relay = try RelayProcess(["--config", file.path], environment: ["KEY": "k-secret"])
        #expect(try await relay.call("ping")["result"] != nil)
        let stateDirectory = try TemporaryDirectory.make().appendingPathComponent("sessions.db").path
        try file.write(
            Self.recordingConfig(server, profiles: ["a", "b"], store: "{ type: sqlite, path: \(stateDirectory) }"))
        let reload = try await relay.call("config-reload")
        #expect(reload["error"]?["data"]?["kind"] == "config", "\(reload.jsonText)")
        #expect(reload["error"]?["data"]?["sections"] == ["store"], "\(reload.jsonText)")
        #expect(reload["error"]?["message"]?.stringValue?.contains("restart") == true)
        let b = try await relay.call("request", ["profile": "b", "path": "/echo"])
        #expect(b["error"]?["data"]?["kind"] == "unknown_profile", "the added profile was not applied: \(b.jsonText)")
        #expect(!FileManager.default.fileExists(atPath: stateDirectory), "the new store was never opened")
    }
}
