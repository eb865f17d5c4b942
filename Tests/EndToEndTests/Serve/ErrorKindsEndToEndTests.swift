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

    /// An authorization server's endpoint that cannot be used, and the kind every endpoint gives for it: the
    /// token endpoint's (SPEC §5: an answer that is not a token is `auth`, one that cannot be reached `transport`).
    struct UnusableEndpoint: Sendable, CustomTestStringConvertible {
        let name: String
        let url: @Sendable (RecordingServer) -> String
        let kind: String

        var testDescription: String { name }
    }

    static let unusableEndpoints: [UnusableEndpoint] = [
        UnusableEndpoint(name: "HTTP 500", url: { "\($0.origin)/status/500" }, kind: "auth"),
        UnusableEndpoint(name: "HTTP 404", url: { "\($0.origin)/status/404" }, kind: "auth"),
        UnusableEndpoint(
            name: "connection refused", url: { "http://127.0.0.1:\($0.closedPort)/endpoint" }, kind: "transport"),
    ]

    /// The same unusable endpoint as a token endpoint, as a device authorization endpoint and as the GitHub Actions
    /// token service an assertion grant asks: the same kind from each (issue 46: one authorization-server call).
    @Test(arguments: unusableEndpoints)
    func anUnusableAuthorizationServerEndpointGivesTheSameKindEverywhere(_ endpoint: UnusableEndpoint) async throws {
        let server = try await RecordingServer()
        let url = endpoint.url(server)
        let never = "\(server.origin)/status/200"
        let path = try TemporaryDirectory.file(
            """
            version: 1
            environments:
              local:
                base_url: \(server.origin)
                profiles:
                  service:
                    type: client_credentials
                    token_url: \(url)
                    client_id: app
                    client_secret: s3cret-canary-46
                  ci:
                    type: jwt_bearer
                    token_url: \(never)
                    client_id: ci
                    assertion: { github_actions: { audience: https://as.example } }
                  tv:
                    type: device_code
                    token_url: \(never)
                    device_authorization_url: \(url)
                    client_id: tv
            """)
        let relay = try RelayProcess(
            ["serve", "--config", path],
            environment: [
                "ACTIONS_ID_TOKEN_REQUEST_URL": url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "gha-request-canary-46",
            ])
        let tokenEndpoint = try await relay.call("request", ["path": "/data", "profile": "service"])
        let assertion = try await relay.call("request", ["path": "/data", "profile": "ci"])
        let device = try await relay.call("login", ["profile": "tv"])
        for (what, reply) in [("token endpoint", tokenEndpoint), ("assertion", assertion), ("device", device)] {
            #expect(reply["error"]?["data"]?["kind"]?.stringValue == endpoint.kind, "\(what): \(reply.jsonText)")
        }
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        for canary in ["s3cret-canary-46", "gha-request-canary-46"] {
            #expect(!relay.stderrText.contains(canary) && !relay.stdoutText.contains(canary))
        }
    }

    /// The same unusable endpoint as a session's revocation endpoint (named by the issuer's metadata): `logout`
    /// stands, and what it logs of each token it could not revoke has the token endpoint's kind.
    @Test(arguments: unusableEndpoints)
    func anUnusableRevocationEndpointGivesTheSameKind(_ endpoint: UnusableEndpoint) async throws {
        let server = try await RecordingServer()
        let idp = try await ScriptedIdP(["metadata": ["revocation_endpoint": .string(endpoint.url(server))]])
        let path = try idp.config([
            (
                "seeded",
                [
                    "type: refresh_token", "issuer: \(idp.origin)", "client_id: app", "refresh_token: { env: SEED }",
                    "expose_token: true",
                ]
            )
        ])
        let relay = try RelayProcess(["serve", "--config", path], environment: ["SEED": "rt-seed-canary-46"])
        let token = try await relay.call("token-get")
        #expect(token["result"]?["access_token"]?.stringValue != nil, "\(token.jsonText)")
        let logout = try await relay.call("logout")
        #expect(logout["result"]?["loggedOut"]?.intValue == 1, "\(logout.jsonText)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        let warnings = relay.stderrText.split(separator: "\n").filter { $0.contains("was not revoked at the server") }
        #expect(warnings.count == 2, "\(relay.stderrText)")
        for warning in warnings {
            #expect(warning.hasSuffix("(kind \(endpoint.kind))"), "\(warning)")
        }
        #expect(!relay.stderrText.contains("rt-seed-canary-46") && !relay.stdoutText.contains("rt-seed-canary-46"))
    }
}
