import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// `Fixtures/rotating_token_server.py` (one per test) and the processes a test runs against it,
/// all sharing one session store: a token endpoint that rotates refresh tokens and refuses a spent
/// one, and an API that refuses revoked access tokens. The server is driven through the binary
/// itself (`tokenrelay call GET URL --no-auth`), and each control answer comes after its effect.
final class RotatingTokenServer: Sendable {
    static let seed = "seed-rotating-0"
    static let clientSecret = "rotating-client-secret-5e1b"

    let fixture: FixtureServer
    let configPath: String
    let stateHome = RelayProcess.freshStateHome()
    /// The session store of the processes this server's config runs.
    var database: String { stateHome + "/tokenrelay/sessions.db" }

    /// `holdFirstRefresh`: the first refresh is answered only after ``release()``; `holdRefresh`
    /// N > 0: the Nth accepted one is. `sealed`: the store is sealed under the key in the
    /// environment variable `ROTATING_STORE_KEY` (each process passes its own, see ``start(_:environment:closingStdin:)``).
    init(holdFirstRefresh: Bool = false, holdRefresh: Int = 0, sealed: Bool = false) async throws {
        let hold =
            holdFirstRefresh ? ["--hold-first-refresh"] : holdRefresh > 0 ? ["--hold-refresh", "\(holdRefresh)"] : []
        fixture = try await FixtureServer(
            script: RecordingServer.fixtures.appendingPathComponent("rotating_token_server.py").path,
            [Self.seed] + hold, words: 1)
        let origin = "http://127.0.0.1:\(fixture.ports[0])"
        let store = sealed ? "store: { type: sqlite, encryption_key: { env: ROTATING_STORE_KEY } }\n" : ""
        configPath = try TemporaryDirectory.file(
            """
            version: 1
            \(store)default_environment: api
            environments:
              api:
                base_url: \(origin)/api
                # A safety net, not a bound the tests measure: a held refresh waits for the test's
                # next steps, each a process of its own, which take long on a loaded machine.
                timeout: 300s
                default_profile: seeded
                profiles:
                  seeded:
                    type: refresh_token
                    token_url: \(origin)/token
                    client_id: cli
                    refresh_token: { env: ROTATING_SEED }
                    expose_token: true
                  svc:
                    type: client_credentials
                    token_url: \(origin)/token
                    client_id: svc
                    client_secret: { env: ROTATING_SECRET }
                    expose_token: true
            """)
    }

    var origin: String { "http://127.0.0.1:\(fixture.ports[0])" }

    /// `tokenrelay ARGUMENTS --config …` on this server's store, with `environment` added; stdin
    /// closed unless `closingStdin` is false.
    func start(_ arguments: [String], environment: [String: String] = [:], closingStdin: Bool = true) throws
        -> RelayProcess
    {
        let process = try RelayProcess(
            arguments + ["--config", configPath],
            environment: [
                "XDG_STATE_HOME": stateHome, "ROTATING_SEED": Self.seed, "ROTATING_SECRET": Self.clientSecret,
            ].merging(environment) { $1 }, testMethods: false)
        if closingStdin { try process.closeStdin() }
        return process
    }

    /// Runs `tokenrelay ARGUMENTS` to its end: exit code, stdout, stderr.
    func run(_ arguments: [String], environment: [String: String] = [:]) async throws
        -> (code: Int32, stdout: String, stderr: String)
    {
        let process = try start(arguments, environment: environment)
        let code = try await process.exitCode()
        #expect(!process.stderrText.contains(Self.clientSecret) && !process.stdoutText.contains(Self.clientSecret))
        return (code, process.stdoutText, process.stderrText)
    }

    /// One control route (`/control/...`), through the binary; its JSON answer.
    @discardableResult
    func control(_ path: String) async throws -> JSONValue {
        let result = try await run(["call", "GET", origin + path, "--no-auth"])
        try #require(result.code == 0, "control \(path): \(result.stderr)")
        return try JSONParser.parse(result.stdout)
    }

    /// Returns once the held refresh is at the token endpoint.
    func awaitHeldRefresh() async throws { try await control("/control/await?event=held") }
    /// Lets the held refresh be answered.
    func release() async throws { try await control("/control/release") }
    /// The next process (`tokenrelay token --min-valid 60s`) finds the committed token due and
    /// refreshes it with the rotated refresh token `rt-1`: accepted, as a replay of the spent seed
    /// would not be; nothing was presented twice.
    func expectTheNextProcessRefreshesWithTheRotatedToken(sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let next = try await run(["token", "--min-valid", "60s"])
        #expect(next.code == 0, "\(next.stderr)", sourceLocation: sourceLocation)
        #expect(next.stdout == "at-2\n", sourceLocation: sourceLocation)
        let stats = try await stats()
        #expect(stats.reuses == 0, sourceLocation: sourceLocation)
        #expect(stats.refreshes == [Self.seed, "rt-1"], sourceLocation: sourceLocation)
    }

    /// Revokes every access token issued so far.
    func revokeAll() async throws { try await control("/control/revoke") }
    /// How many spent refresh tokens were presented again, and every refresh token presented.
    func stats() async throws -> (reuses: Int, refreshes: [String]) {
        let stats = try await control("/control/stats")
        return (
            stats["reuses"]?.numberValue?.intValue ?? -1,
            (stats["refreshes"]?.arrayValue ?? []).compactMap(\.stringValue)
        )
    }
}
