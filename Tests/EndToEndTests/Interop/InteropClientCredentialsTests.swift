import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the real authorization server (Django OAuth Toolkit) and resource
/// server: client credentials, single-flight at cold start, invalidation, 401 recovery, refusals.
/// Each test has a stack of its own, so the token counts at the AS are exact.
@Suite(.serialized) struct InteropClientCredentialsTests {
    /// One client authentication method and the seeded client that uses it.
    struct ClientCase: Sendable, CustomTestStringConvertible {
        let client: String
        let secret: String
        let auth: String
        var testDescription: String { "\(client) \(auth)" }
    }

    static let clientCases = [
        ClientCase(client: "svc", secret: "svc-secret", auth: "client_secret_basic"),
        ClientCase(client: "svcpost", secret: "svcpost-secret", auth: "client_secret_post"),
        // RFC 6749 §2.3.1: id and secret are form-encoded before Basic.
        ClientCase(client: "svc odd:1", secret: "p@ss w:rd+/%é", auth: "client_secret_basic"),
        ClientCase(client: "svc odd:1", secret: "p@ss w:rd+/%é", auth: "client_secret_post"),
    ]

    @Test(arguments: clientCases)
    func clientAuthenticationMethodGetsATokenAndTheResourceAnswers(_ clientCase: ClientCase) async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [
                    (
                        "service",
                        stack.clientCredentials(
                            client: clientCase.client, secretVariable: "SECRET", auth: clientCase.auth)
                    )
                ],
                environment: ["SECRET": clientCase.secret])
            let answer = try await relay.call("request", ["path": "/whoami"])
            #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            #expect(answer["result"]?["json"]?["client_id"]?.stringValue == clientCase.client)
            #expect(try await stack.issuedCount(client: clientCase.client) == 1)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }

    @Test func twoHundredConcurrentRequestsAtColdStartShareOneToken() async throws {
        try await InteropStack.with(.init(rsCache: 60)) { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            let callers = 200
            var batch = ""
            for id in 0..<callers {
                batch += #"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/whoami"}}"# + "\n"
            }
            let start = ContinuousClock.now
            try relay.write(batch)
            let lines = try await relay.lines(atLeast: callers, timeout: .seconds(300))
            let wall = ContinuousClock.now - start
            #expect(lines.count == callers)
            #expect(lines.allSatisfy { $0["result"]?["status"]?.intValue == 200 })
            #expect(Set(lines.compactMap { $0["id"]?.intValue }) == Set(0..<callers))
            let issued = try await stack.issuedCount(client: "svc")
            #expect(issued == 1)
            print("storm: \(callers) concurrent callers at cold start, \(issued) token call(s), wall time \(wall)")
            let status = try await relay.call("status")
            let session = status["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["counters"]?["acquisitions"]?.intValue == 1)
            #expect(session?["state"]?.stringValue == "valid")
        }
    }

    @Test func tokenInvalidateMakesTheNextRequestRenewOnceAndStatusShowsIt() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "svc") == 1)
            let before = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(before?["counters"]?["renewals"]?.intValue == 0)

            let invalidated = try await relay.call("token-invalidate", ["profile": "service"])
            #expect(invalidated["result"]?["invalidated"]?.intValue == 1, "\(invalidated.jsonText)")
            #expect(try await stack.issuedCount(client: "svc") == 1, "invalidation alone calls nobody")
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            #expect(try await stack.issuedCount(client: "svc") == 2)

            let after = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(after?["state"]?.stringValue == "valid")
            #expect(after?["counters"]?["acquisitions"]?.intValue == 1)
            #expect(after?["counters"]?["renewals"]?.intValue == 1, "\(after?.jsonText ?? "")")
        }
    }

    @Test func revokedTokenIsRecoveredForGetAndReturnedAs401ForPostSentOnce() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            let first = try await stack.issuedValues(client: "svc", kind: "access")
            #expect(first.count == 1)
            for token in first {
                try await stack.revoke(token, hint: "access_token", client: "svc", secret: "svc-secret")
            }

            // GET: the 401 invalid_token is recovered transparently with one new token.
            let recovered = try await relay.call("request", ["path": "/whoami"])
            #expect(recovered["result"]?["status"]?.intValue == 200, "\(recovered.jsonText)")
            #expect(try await stack.issuedCount(client: "svc") == 2)
            let status = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(status?["counters"]?["recoveries"]?.intValue == 1, "\(status?.jsonText ?? "")")

            // POST with a body: never replayed; the 401 is the caller's, and the RS saw it once.
            let current = try await stack.issuedValues(client: "svc", kind: "access")
            #expect(current.count == 2)
            if let token = current.last {
                try await stack.revoke(token, hint: "access_token", client: "svc", secret: "svc-secret")
            }
            let tag = "post-\(UUID().uuidString.prefix(8))"
            let post = try await relay.call(
                "request",
                ["method": "POST", "path": "/echo", "json": ["order": 1], "headers": ["X-Request-Tag": .string(tag)]])
            #expect(post["result"]?["status"]?.intValue == 401, "\(post.jsonText)")
            #expect(try await stack.received(tag: tag) == 1)
            #expect(try await stack.issuedCount(client: "svc") == 2, "a POST's 401 renews nothing before answering")
        }
    }

    @Test func fiftyConcurrentGetsOnARevokedTokenCauseOneRenewal() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            for token in try await stack.issuedValues(client: "svc", kind: "access") {
                try await stack.revoke(token, hint: "access_token", client: "svc", secret: "svc-secret")
            }
            let callers = 50
            var batch = ""
            for id in 0..<callers {
                batch += #"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/whoami"}}"# + "\n"
            }
            try relay.write(batch)
            let lines = try await relay.lines(atLeast: callers + 1, timeout: .seconds(300)).dropFirst()
            for line in lines {
                #expect(line["result"]?["status"]?.intValue == 200, "\(line.jsonText)")
            }
            #expect(
                try await stack.issuedCount(client: "svc") == 2,
                "one renewal for every GET rejected with the same token")
        }
    }

    @Test func recoveriesBeyondFiveInThirtySecondsArePausedUntilTokenInvalidate() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            var answers: [JSONValue] = []
            for _ in 0..<6 {
                if let token = try await stack.issuedValues(client: "svc", kind: "access").last {
                    try await stack.revoke(token, hint: "access_token", client: "svc", secret: "svc-secret")
                }
                answers.append(try await relay.call("request", ["path": "/whoami"]))
            }
            for answer in answers.prefix(5) {
                #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            }
            let paused = answers[5]
            #expect(paused["error"]?["code"]?.intValue == -32010, "\(paused.jsonText)")
            #expect(paused["error"]?["data"]?["kind"]?.stringValue == "auth")
            #expect(try await stack.issuedCount(client: "svc") == 6, "the first token and five recoveries")
            let notification = try await relay.firstLine(timeout: .seconds(60), what: "auth-failed") {
                $0["method"]?.stringValue == "auth-failed"
            }
            #expect(notification["params"]?["kind"]?.stringValue == "auth", "\(notification.jsonText)")

            #expect(try await relay.call("token-invalidate")["result"]?["invalidated"]?.intValue == 1)
            let cleared = try await relay.call("request", ["path": "/whoami"])
            #expect(cleared["result"]?["status"]?.intValue == 200, "\(cleared.jsonText)")
            #expect(try await stack.issuedCount(client: "svc") == 7)
        }
    }

    @Test func tokenGetReturnsTheSessionsTokenOnlyWhenTheProfileExposesIt() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [
                    (
                        "exposed",
                        stack.clientCredentials(client: "svc", secretVariable: "SECRET") + ["expose_token: true"]
                    ),
                    (
                        "hidden",
                        stack.clientCredentials(
                            client: "svcpost", secretVariable: "POST_SECRET", auth: "client_secret_post")
                    ),
                ],
                environment: ["SECRET": "svc-secret", "POST_SECRET": "svcpost-secret"])
            let got = try await relay.call("token-get", ["profile": "exposed"])
            let token = got["result"]?["access_token"]?.stringValue
            #expect(token != nil, "\(got["error"]?.jsonText ?? "")")
            #expect(try await stack.issuedValues(client: "svc", kind: "access") == [token ?? "-"])
            let direct = try await stack.curl([
                "-sS", "-H", "Authorization: Bearer \(token ?? "-")", "\(stack.rsURL)/whoami",
            ])
            #expect(direct.status == 200)
            #expect(
                try await relay.call("request", ["path": "/whoami", "profile": "exposed"])["result"]?["status"]?
                    .intValue == 200)
            #expect(try await stack.issuedCount(client: "svc") == 1, "request and token-get share the session")

            let refused = try await relay.call("token-get", ["profile": "hidden"])
            #expect(refused["error"]?["data"]?["kind"]?.stringValue == "not_supported", "\(refused.jsonText)")
            #expect(try await stack.issuedCount(client: "svcpost") == 0)
        }
    }

    @Test func wrongClientSecretIsAnAuthErrorWithInvalidClient() async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "not-the-svc-secret"])
            let answer = try await relay.call("request", ["path": "/whoami"])
            #expect(answer["error"]?["code"]?.intValue == -32010, "\(answer.jsonText)")
            #expect(answer["error"]?["data"]?["kind"]?.stringValue == "auth")
            #expect(answer["error"]?["data"]?["oauthError"]?.stringValue == "invalid_client")
            #expect(try await stack.issuedCount() == 0)
            try relay.closeStdin()
            _ = try await relay.exitCode()
            #expect(!relay.stdoutText.contains("not-the-svc-secret"))
            #expect(!relay.stderrText.contains("not-the-svc-secret"))
        }
    }

    @Test func issuerMismatchInDiscoveryIsAnErrorAndNoTokenIsRequested() async throws {
        try await InteropStack.with { stack in
            var lines = stack.clientCredentials(client: "svc", secretVariable: "SECRET")
            lines = lines.map { $0.hasPrefix("issuer:") ? "issuer: \(stack.rsURL)/mixup" : $0 }
            let relay = try stack.startRelay(profiles: [("service", lines)], environment: ["SECRET": "svc-secret"])
            let answer = try await relay.call("request", ["path": "/whoami"])
            let kind = answer["error"]?["data"]?["kind"]?.stringValue
            #expect(kind == "auth" || kind == "config", "\(answer.jsonText)")
            #expect(answer["result"] == nil)
            #expect(try await stack.issuedCount(kind: "all") == 0)
        }
    }
}
