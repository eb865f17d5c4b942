import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay subscribe --until-closed` (SPEC §5.5) against the fixture server's finite streams:
/// a clean end of the stream ends the command; a failed connection before it is still retried.
@Suite struct SubscribeUntilClosedTests {
    let fixture: FixtureServer
    let config: String

    init() async throws {
        fixture = try await FixtureServer(role: "events", ports: 1)
        config = try TemporaryDirectory.file(
            """
            version: 1
            default_environment: events
            environments:
              events:
                base_url: http://127.0.0.1:\(fixture.ports[0])
                default_profile: token
                profiles:
                  token: { type: bearer, token: { env: EVENTS_TOKEN } }
            """)
    }

    /// Runs `tokenrelay subscribe` to completion (bounded by the harness's exit wait).
    func subscribe(_ arguments: [String]) async throws -> (code: Int32, lines: [JSONValue], process: RelayProcess) {
        let process = try RelayProcess(
            ["subscribe"] + arguments + ["--config", config], environment: ["EVENTS_TOKEN": "tok-1"],
            testMethods: false)
        let code = try await process.exitCode()
        let lines = try process.stdoutText.split(separator: "\n").map { try JSONParser.parse(String($0)) }
        return (code, lines, process)
    }

    /// What the server saw for `key`: `/stats` through `tokenrelay call`.
    func stats(_ key: String) async throws -> JSONValue {
        let process = try RelayProcess(
            ["call", "GET", "/stats?key=\(key)", "--no-auth", "--config", config], testMethods: false)
        #expect(try await process.exitCode() == 0, "\(process.stderrText)")
        return try JSONParser.parse(process.stdoutText)
    }

    @Test func aServerThatSendsThreeEventsAndClosesEndsTheCommandWithExitZero() async throws {
        defer { fixture.stop() }
        let result = try await subscribe(["/events?key=three&end_after=3", "--until-closed"])
        #expect(result.code == 0, "\(result.process.stderrText)")
        #expect(result.lines.compactMap { $0["id"]?.stringValue } == ["1", "2", "3"], "\(result.process.stdoutText)")
        #expect(result.lines.map { $0["data"]?.stringValue } == ["event 1", "event 2", "event 3"])
        let stats = try await stats("three")
        #expect(stats["requests"] == .int(1), "one connection, no reconnect: \(stats.jsonText)")
        #expect(stats["authorizations"]?.arrayValue?.first == .string("Bearer tok-1"), "\(stats.jsonText)")
    }

    @Test func aFailedConnectionIsStillRetriedBeforeTheCleanEnd() async throws {
        defer { fixture.stop() }
        let result = try await subscribe(["/events?key=retry&fail=1&code=503&end_after=3", "--until-closed"])
        #expect(result.code == 0, "\(result.process.stderrText)")
        #expect(result.lines.compactMap { $0["id"]?.stringValue } == ["1", "2", "3"], "\(result.process.stdoutText)")
        #expect(try await stats("retry")["requests"] == .int(2), "the 503, then the stream")
    }

    @Test func theMethodParamIsChecked() async throws {
        defer { fixture.stop() }
        let relay = try RelayProcess(["--config", config], environment: ["EVENTS_TOKEN": "tok-1"])
        try relay.send(
            #"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"path":"/events?key=p","untilClosed":"yes"}}"#)
        let lines = try await relay.lines(atLeast: 1)
        #expect(lines[0]["error"]?["code"] == .int(-32602), "\(lines[0].jsonText)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }
}
