import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The same bad input gets the same kind from `request`, `subscribe` and `call` (issue 35): a
/// subscription's connection failures go through the error mapping a `request` answers with, and
/// whether it reconnects is the transport's verdict on the error (`HTTPError.isRetryable`), not a
/// second table.
@Suite struct ErrorKindsEndToEndTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        /// The environment's `base_url`, from the recording server.
        let baseURL: @Sendable (RecordingServer) -> String
        let kind: String
        /// Whether a subscription tries again (`reconnecting`) rather than closing at once.
        let retried: Bool
        /// `tokenrelay call`'s exit code for the kind (README's table).
        let callExitCode: Int32

        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "connection refused", baseURL: { "http://127.0.0.1:\($0.closedPort)" }, kind: "transport",
            retried: true, callExitCode: 7),
        // TLS against a plain HTTP listener: the handshake fails, and no reconnect can cure that.
        Case(
            name: "TLS handshake", baseURL: { "https://127.0.0.1:\($0.port)" }, kind: "transport", retried: false,
            callExitCode: 7),
    ]

    static func config(_ baseURL: String) throws -> String {
        try TemporaryDirectory.file(
            """
            version: 1
            environments:
              local:
                base_url: \(baseURL)
            """)
    }

    @Test(arguments: cases)
    func requestSubscribeAndCallReportTheSameKind(_ testCase: Case) async throws {
        let server = try await RecordingServer()
        let path = try Self.config(testCase.baseURL(server))
        let relay = try RelayProcess(["serve", "--config", path])

        let reply = try await relay.call("request", ["method": "GET", "path": "/data"])
        #expect(reply["error"]?["data"]?["kind"]?.stringValue == testCase.kind, "\(reply.jsonText)")

        let sub = try await relay.subscribe(["path": "/events"])
        let lines = try await relay.waitForLines(what: "the first failure of \(sub)") { lines in
            lines.notifications(of: sub).contains {
                ["reconnecting", "closed"].contains($0["params"]?["state"]?.stringValue)
            }
        }
        let failure = try #require(
            lines.notifications(of: sub).first {
                ["reconnecting", "closed"].contains($0["params"]?["state"]?.stringValue)
            })
        #expect(failure["params"]?["error"]?["kind"]?.stringValue == testCase.kind, "\(failure.jsonText)")
        #expect(failure["params"]?["state"]?.stringValue == (testCase.retried ? "reconnecting" : "closed"))
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)

        let call = try RelayProcess(["call", "GET", "/data", "--config", path], testMethods: false)
        try call.closeStdin()
        #expect(try await call.exitCode() == testCase.callExitCode)
        #expect(call.stderrText.contains(testCase.kind), "\(call.stderrText)")
    }
}
