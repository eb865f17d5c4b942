import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay call` against the recording server: body on stdout, status-class exit codes,
/// `-v` on stderr, `--query`, `-H`, `--json`.
@Suite struct CallCommandEndToEndTests {
    static let apiKey = "canary-call-key-93be"

    struct Setup {
        let server: RecordingServer
        let configPath: String

        init() async throws {
            server = try await RecordingServer()
            configPath = try TemporaryDirectory.file(
                """
                version: 1
                default_environment: local
                environments:
                  local:
                    base_url: \(server.origin)
                    default_profile: key
                    profiles:
                      key:
                        type: api_key
                        header: X-API-Key
                        value: { env: E2E_CALL_KEY }
                      basic:
                        type: basic
                        username: u
                        password: { env: E2E_CALL_KEY }
                  down:
                    base_url: http://127.0.0.1:\(server.closedPort)
                """)
        }

        /// Runs `tokenrelay call ARGS --config PATH` to completion.
        func call(_ arguments: [String]) async throws -> (code: Int32, process: RelayProcess) {
            let process = try RelayProcess(
                ["call"] + arguments + ["--config", configPath],
                environment: ["E2E_CALL_KEY": CallCommandEndToEndTests.apiKey],
                testMethods: false)
            try process.closeStdin()
            return (try await process.exitCode(), process)
        }
    }

    @Test func aStoreThatCannotOpenEndsTheCallWithAConfigErrorAndSendsNothing() async throws {
        // `call` starts opening the store of a profile that keeps its session before the request
        // (beside libcurl's load); a store it must refuse is still reported, by the first read.
        let server = try await RecordingServer()
        let state = try TemporaryDirectory.make().path
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: state)
        let configPath = try TemporaryDirectory.file(
            """
            version: 1
            store: { type: sqlite, path: \(state)/sessions.db }
            environments:
              local:
                base_url: \(server.origin)
                profiles:
                  svc:
                    type: client_credentials
                    token_url: \(server.origin)/token
                    client_id: svc
                    client_secret: { env: E2E_CALL_KEY }
            """)
        let process = try RelayProcess(
            ["call", "GET", "/status/200", "--config", configPath], environment: ["E2E_CALL_KEY": Self.apiKey],
            testMethods: false)
        try process.closeStdin()
        #expect(try await process.exitCode() == 3)
        #expect(process.stdoutText.isEmpty)
        #expect(process.stderrText.contains("the store directory \(state) is accessible by group or others (mode 755)"))
        #expect(!process.stderrText.contains(Self.apiKey))
        #expect(try server.records().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: state + "/sessions.db"))
    }

    @Test func printsTheBodyAndExitsZeroFor2xx() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call(["GET", "/status/200"])
        #expect(code == 0)
        #expect(process.stdoutText == "status 200")
        #expect(process.stderrText.isEmpty)
        #expect(try setup.server.last("/status/200")?.header("X-API-Key") == [Self.apiKey])
    }

    @Test(arguments: [(404, Int32(4)), (500, Int32(5)), (302, Int32(6))])
    func exitCodeFollowsTheStatusClass(status: Int, expected: Int32) async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call(["GET", "/status/\(status)"])
        #expect(code == expected)
        #expect(process.stdoutText == "status \(status)")
    }

    @Test func connectionRefusedExitsSevenUnknownEnvironmentThreeBadUsageTwo() async throws {
        let setup = try await Setup()
        let refused = try await setup.call(["GET", "/x", "--env", "down"])
        #expect(refused.code == 7)
        #expect(refused.process.stdoutText.isEmpty)
        #expect(refused.process.stderrText.contains("transport"))
        let unknown = try await setup.call(["GET", "/x", "--env", "nope"])
        #expect(unknown.code == 3)
        #expect(unknown.process.stderrText.contains("unknown_environment"))
        let usage = try await setup.call(["GET"])
        #expect(usage.code == 2)
        let both = try await setup.call(["POST", "/echo", "--json", "{}", "--data", "x"])
        #expect(both.code == 2)
        let badOption = try await setup.call(["GET", "/echo", "--frobnicate"])
        #expect(badOption.code == 2)
        #expect(try setup.server.records().isEmpty)
        for result in [refused, unknown, usage, both, badOption] {
            #expect(!result.process.stderrText.contains(Self.apiKey))
        }
    }

    /// `-v` says why credentials were not attached: `localhost` is not `127.0.0.1` (issue 36).
    @Test func verboseSaysWhyCredentialsWereNotAttachedToAnotherOrigin() async throws {
        let setup = try await Setup()
        let port = setup.server.port
        let (code, process) = try await setup.call(["GET", "http://localhost:\(port)/echo", "-v"])
        #expect(code == 0, "\(process.stderrText)")
        #expect(
            process.stderrText.contains(
                "origin http://localhost:\(port) is not the environment's origin http://127.0.0.1:\(port); "
                    + "add it to allowed_origins"), "\(process.stderrText)")
        #expect(try setup.server.records().first?.header("X-API-Key").isEmpty == true)
        #expect(!process.stderrText.contains(Self.apiKey))
    }

    /// An unknown environment or profile lists the known ones, with a did-you-mean.
    @Test func anUnknownEnvironmentOrProfileListsTheKnownOnesWithADidYouMean() async throws {
        let setup = try await Setup()
        let environment = try await setup.call(["GET", "/x", "--env", "locl"])
        #expect(environment.code == 3)
        #expect(
            environment.process.stderrText.contains(
                "unknown environment 'locl'; did you mean 'local'? (known: local, down)"),
            "\(environment.process.stderrText)")
        let profile = try await setup.call(["GET", "/x", "--profile", "bsic"])
        #expect(profile.code == 3)
        #expect(
            profile.process.stderrText.contains(
                "unknown profile 'bsic' in environment 'local'; did you mean 'basic'? (known: key, basic)"),
            "\(profile.process.stderrText)")
        #expect(try setup.server.records().isEmpty)
    }

    @Test func verbosePrintsTheStatusLineOnStderrOnly() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call(["get", "/status/201", "-v"])
        #expect(code == 0)
        #expect(process.stdoutText == "status 201")
        #expect(process.stderrText.hasPrefix("HTTP 201"))
        #expect(!process.stderrText.contains(Self.apiKey))
        #expect(try setup.server.last("/status/201")?.method == "GET")
    }

    @Test func queryHeadersAndJSONBodyAreSent() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call([
            "POST", "/echo", "--query", "tag=a", "--query", "tag=b", "--query", "n=5",
            "-H", "X-Trace: abc 123", "--json", #"{"id":12345678901234567890,"ok":true}"#,
        ])
        #expect(code == 0)
        let echoed = try JSONParser.parse(process.stdoutText)
        #expect(echoed["method"] == "POST")
        let record = try #require(try setup.server.last("/echo"))
        #expect(record.queryPairs == ["tag=a", "tag=b", "n=5"])
        #expect(record.header("X-Trace") == ["abc 123"])
        #expect(record.header("X-API-Key") == [Self.apiKey])
        #expect(
            try JSONParser.parse(String(decoding: record.body, as: UTF8.self)).jsonText
                == #"{"id":12345678901234567890,"ok":true}"#)
    }

    @Test func dataSendsTextAndNoAuthSendsNoCredentials() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call([
            "PUT", "/reflect", "--data", "plain text ✓", "-H", "Content-Type: text/plain", "--no-auth",
        ])
        #expect(code == 0)
        #expect(process.stdoutText == "plain text ✓")
        let record = try #require(try setup.server.last("/reflect"))
        #expect(record.body == Array("plain text ✓".utf8))
        #expect(record.header("X-API-Key").isEmpty)
    }

    @Test func traceLoggingNeverPrintsTheKey() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call(["GET", "/status/200", "-v", "--log-level", "trace"])
        #expect(code == 0)
        #expect(process.stderrText.contains("/status/200"), "trace logging is on: \(process.stderrText)")
        #expect(!process.stderrText.contains(Self.apiKey))
        #expect(!process.stdoutText.contains(Self.apiKey))
        #expect(try setup.server.last("/status/200")?.header("X-API-Key") == [Self.apiKey])
    }

    @Test func callerAuthorizationWithAnAuthorizationProfileIsAUsageError() async throws {
        let setup = try await Setup()
        let (code, process) = try await setup.call([
            "GET", "/echo", "--profile", "basic", "-H", "authorization: Bearer mine",
        ])
        #expect(code == 2, "\(process.stderrText)")
        #expect(try setup.server.records().isEmpty)
        let unknown = try await setup.call(["GET", "/echo", "--profile", "nope"])
        #expect(unknown.code == 3)
    }
}
