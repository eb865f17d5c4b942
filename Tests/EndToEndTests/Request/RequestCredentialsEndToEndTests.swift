import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Static credentials, environment headers and the origin policy through the real binary: what
/// the server receives, and that no secret reaches stdout or stderr even at trace level.
@Suite struct RequestCredentialsEndToEndTests {
    static let apiKey = "canary-api-key-7f3a9c"
    static let password = "canary-basic-password-51d2"
    static let commandToken = "canary-command-token-e08b"
    static let staticToken = "canary-static-bearer-aa41"

    /// The secrets as environment variables, and the file counting token-command runs.
    struct Setup {
        let server: RecordingServer
        let countFile: String
        var environment: [String: String] {
            ["E2E_API_KEY": apiKey, "E2E_PASSWORD": password, "E2E_BEARER": staticToken]
        }

        init() async throws {
            server = try await RecordingServer()
            countFile = try TemporaryDirectory.make().appendingPathComponent("runs.txt").path
        }

        var runs: Int {
            ((try? String(contentsOfFile: countFile, encoding: .utf8)) ?? "").split(separator: "\n").count
        }

        var config: String {
            let script = RecordingServer.fixtures.appendingPathComponent("token_command.py").path
            return """
                version: 1
                default_environment: local
                environments:
                  local:
                    base_url: \(server.origin)/api
                    default_profile: key
                    headers:
                      X-Env: from-environment
                      X-Both: environment
                    profiles:
                      key:
                        type: api_key
                        header: X-API-Key
                        value: { env: E2E_API_KEY }
                      querykey:
                        type: api_key
                        query: api_key
                        value: { env: E2E_API_KEY }
                      basic:
                        type: basic
                        username: alice
                        password: { env: E2E_PASSWORD }
                      static:
                        type: bearer
                        token: { env: E2E_BEARER }
                      helper:
                        type: bearer
                        token: { command: [/usr/bin/python3, \(script), \(countFile), \(commandToken)] }
                        cache: 5m
                  down:
                    base_url: http://127.0.0.1:\(server.closedPort)
                    default_profile: querykey
                    profiles:
                      querykey:
                        type: api_key
                        query: api_key
                        value: { env: E2E_API_KEY }
                  allowing:
                    base_url: \(server.origin)/api
                    allowed_origins: [\(server.otherOrigin)]
                    default_profile: key
                    headers:
                      X-Env: from-environment
                    profiles:
                      key:
                        type: api_key
                        header: X-API-Key
                        value: { env: E2E_API_KEY }
                """
        }

        func client(trace: Bool = true) throws -> RelayClient {
            try RelayClient(config: config, environment: environment, arguments: trace ? ["--log-level", "trace"] : [])
        }
    }

    /// Asserts no form of `secret` is on stdout or stderr.
    static func expectNeverPrinted(
        _ secrets: [String], _ relay: RelayProcess, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for secret in secrets {
            #expect(!relay.stdoutText.contains(secret), "\(secret) on stdout", sourceLocation: sourceLocation)
            #expect(!relay.stderrText.contains(secret), "\(secret) on stderr", sourceLocation: sourceLocation)
        }
    }

    @Test func apiKeyHeaderReachesTheServerButNeverStdoutOrStderrAtTrace() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        #expect(try await client.request(#"{"path":"/status/200"}"#)["result"]?["status"] == .int(200))
        #expect(try await client.request(#"{"path":"/status/401"}"#)["result"]?["status"] == .int(401))
        #expect(try await client.request(#"{"method":"POST","path":"/status/500","json":{"a":1}}"#)["result"] != nil)
        #expect(try setup.server.last("/api/status/200")?.header("X-API-Key") == [Self.apiKey])
        #expect(try await client.finish() == 0)
        #expect(client.relay.stderrText.contains("/api/status/200"), "trace logging is on")
        Self.expectNeverPrinted([Self.apiKey], client.relay)
    }

    @Test func apiKeyInQueryPlacementReachesTheServerButNeverTheLogs() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        let reply = try await client.request(#"{"profile":"querykey","path":"/status/200","query":{"page":2}}"#)
        #expect(reply["result"]?["status"] == .int(200))
        let record = try #require(try setup.server.last("/api/status/200"))
        #expect(record.queryPairs.contains("api_key=\(Self.apiKey)"))
        #expect(record.queryPairs.contains("page=2"))
        #expect(record.header("X-API-Key").isEmpty)
        _ = try await client.finish()
        Self.expectNeverPrinted([Self.apiKey], client.relay)
    }

    @Test func basicCredentialsReachTheServerButTheCanaryPasswordIsNeverPrinted() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        let reply = try await client.request(#"{"profile":"basic","path":"/status/200"}"#)
        #expect(reply["result"]?["status"] == .int(200))
        let encoded = Data("alice:\(Self.password)".utf8).base64EncodedString()
        #expect(try setup.server.last("/api/status/200")?.header("Authorization") == ["Basic \(encoded)"])
        _ = try await client.finish()
        Self.expectNeverPrinted([Self.password, encoded], client.relay)
    }

    @Test func bearerFromACommandRunsOnceWhileCachedAndAgainAfterTokenInvalidate() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        for _ in 0..<3 {
            let reply = try await client.request(#"{"profile":"helper","path":"/status/200"}"#)
            #expect(reply["result"]?["status"] == .int(200))
        }
        #expect(setup.runs == 1)
        #expect(try setup.server.last("/api/status/200")?.header("Authorization") == ["Bearer \(Self.commandToken)"])
        let invalidated = try await client.call("token-invalidate", #"{"profile":"helper"}"#)
        #expect(invalidated["error"] == nil)
        #expect(
            try await client.request(#"{"profile":"helper","path":"/status/200"}"#)["result"]?["status"] == .int(200))
        #expect(
            try await client.request(#"{"profile":"helper","path":"/status/200"}"#)["result"]?["status"] == .int(200))
        #expect(setup.runs == 2)
        _ = try await client.finish()
        Self.expectNeverPrinted([Self.commandToken], client.relay)
    }

    @Test func crossOriginURLGoesWithoutCredentialsOrEnvironmentHeaders() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        let server = setup.server
        _ = try await client.request(#"{"url":"\#(server.otherOrigin)/foreign"}"#)
        let foreign = try #require(try server.records().last { $0.server == "other" && $0.path == "/foreign" })
        #expect(foreign.header("X-API-Key").isEmpty)
        #expect(foreign.header("X-Env").isEmpty)
        #expect(foreign.header("Authorization").isEmpty)

        _ = try await client.request(
            #"{"profile":"static","url":"\#(server.otherOrigin)/foreign-bearer","headers":{"X-Mine":"kept"}}"#)
        let bearer = try #require(try server.records().last { $0.path == "/foreign-bearer" })
        #expect(bearer.header("Authorization").isEmpty)
        #expect(bearer.header("X-Mine") == ["kept"])

        _ = try await client.request(#"{"url":"\#(server.origin)/same-origin"}"#)
        let same = try #require(try server.last("/same-origin"))
        #expect(same.header("X-API-Key") == [Self.apiKey])
        #expect(same.header("X-Env") == ["from-environment"])

        _ = try await client.request(#"{"environment":"allowing","url":"\#(server.otherOrigin)/allowed"}"#)
        let allowed = try #require(try server.records().last { $0.server == "other" && $0.path == "/allowed" })
        #expect(allowed.header("X-API-Key") == [Self.apiKey])
        #expect(allowed.header("X-Env") == ["from-environment"])
        _ = try await client.finish()
        // The log says why, naming both origins and the fix.
        #expect(
            client.relay.stderrText.contains(
                "credentials not attached: origin \(server.otherOrigin) is not the environment's origin "
                    + "\(server.origin); add it to allowed_origins"), "\(client.relay.stderrText)")
        Self.expectNeverPrinted([Self.apiKey, Self.staticToken], client.relay)
    }

    @Test func environmentHeadersAreSentAndPerRequestHeadersWin() async throws {
        let setup = try await Setup()
        let client = try setup.client(trace: false)
        _ = try await client.request(#"{"path":"/echo","headers":{"x-both":"caller","X-Extra":"yes"}}"#)
        let record = try #require(try setup.server.last("/api/echo"))
        #expect(record.header("X-Env") == ["from-environment"])
        #expect(record.header("X-Both") == ["caller"])
        #expect(record.header("X-Extra") == ["yes"])
    }

    @Test func callerAuthorizationConflictsWithAProfileThatSetsIt() async throws {
        let setup = try await Setup()
        let client = try setup.client(trace: false)
        for (profile, name) in [("basic", "Authorization"), ("static", "AUTHORIZATION"), ("helper", "authorization")] {
            let reply = try await client.request(
                #"{"profile":"\#(profile)","path":"/echo","headers":{"\#(name)":"Bearer mine"}}"#)
            #expect(reply["error"]?["code"] == .int(-32602), "\(profile)")
            let pointers =
                reply["error"]?["data"]?["diagnostics"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue } ?? []
            #expect(
                pointers == ["/headers/\(name)"], "the pointer resolves in the params as sent (\(profile)): \(pointers)"
            )
        }
        #expect(try setup.server.records().isEmpty)

        _ = try await client.request(
            #"{"profile":"basic","auth":false,"path":"/no-auth","headers":{"Authorization":"Bearer mine"}}"#)
        let unauthenticated = try #require(try setup.server.last("/api/no-auth"))
        #expect(unauthenticated.header("Authorization") == ["Bearer mine"])
        #expect(unauthenticated.header("X-API-Key").isEmpty)

        _ = try await client.request(#"{"profile":"key","path":"/key","headers":{"Authorization":"Bearer mine"}}"#)
        let keyed = try #require(try setup.server.last("/api/key"))
        #expect(keyed.header("Authorization") == ["Bearer mine"])
        #expect(keyed.header("X-API-Key") == [Self.apiKey])
    }

    @Test func failuresWithAQueryKeyNeverCarryItInErrorsOrLogs() async throws {
        let setup = try await Setup()
        let client = try setup.client()
        let refused = try await client.request(#"{"environment":"down","path":"/x"}"#)
        #expect(refused["error"]?["data"]?["kind"] == "transport")
        let timeout = try await client.request(
            #"{"profile":"querykey","path":"/slow","query":{"id":"k"},"timeoutMs":200}"#)
        #expect(timeout["error"]?["data"]?["kind"] == "timeout")
        #expect(setup.server.logText.contains(Self.apiKey), "the server did receive the key")
        _ = try await client.finish()
        Self.expectNeverPrinted([Self.apiKey], client.relay)
    }

    @Test func aSecretWithALineBreakIsAConfigErrorNamingTheKeyAndTheProcessKeepsServing() async throws {
        let setup = try await Setup()
        var environment = setup.environment
        environment["E2E_BEARER"] = Self.staticToken + "\r\nX-Injected: 1"
        let client = try RelayClient(
            config: setup.config, environment: environment, arguments: ["--log-level", "trace"])
        let refused = try await client.request(#"{"profile":"static","path":"/injected"}"#)
        #expect(refused["error"]?["data"]?["kind"] == "config", "\(refused.jsonText)")
        let message = refused["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("profiles.static.token") && message.contains("line break"), "\(message)")
        #expect(try setup.server.records().contains { $0.path.hasSuffix("/injected") } == false)
        // Other profiles are served as before.
        let served = try await client.request(#"{"profile":"key","path":"/status/200"}"#)
        #expect(served["result"]?["status"]?.intValue == 200, "\(served.jsonText)")
        #expect(try await client.finish() == 0)
        Self.expectNeverPrinted([Self.staticToken, "X-Injected"], client.relay)
    }
}
