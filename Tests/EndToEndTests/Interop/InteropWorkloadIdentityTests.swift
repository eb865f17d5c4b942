import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the strict proof-of-possession server (scripts/interop/pop): the
/// jwt-bearer grant (RFC 7523 §2.1) with an assertion read for every acquisition, and the GitHub
/// Actions OIDC source.
@Suite(.serialized) struct InteropWorkloadIdentityTests {
    @Test func jwtBearerReadsTheAssertionFileAgainForEveryAcquisition() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            let issuerKey = try await stack.makeKey("ec", name: "cluster")
            try stack.trustAssertionIssuer("cluster", publicPEM: issuerKey.publicPEM)
            try stack.registerPopClient("wb", ["auth": "none"])
            let path = stack.stateDirectory.appendingPathComponent("sa-token").path
            let first = try await stack.mintAssertion(
                key: issuerKey, issuer: "cluster", subject: "system:serviceaccount:ns:one", audience: stack.popURL)
            try stack.replaceSecretFile(path, with: first + "\n")
            let relay = try stack.startPopRelay(profiles: [
                (
                    "workload",
                    [
                        "type: jwt_bearer", "issuer: \(stack.popURL)", "client_id: wb", "assertion: { file: \(path) }",
                        "scopes: [read]",
                    ]
                )
            ])
            let one = try await relay.call("request", ["path": "/a"])
            #expect(one["result"]?["json"]?["sub"]?.stringValue == "system:serviceaccount:ns:one", "\(one.jsonText)")
            let second = try await stack.mintAssertion(
                key: issuerKey, issuer: "cluster", subject: "system:serviceaccount:ns:two", audience: stack.popURL)
            try stack.replaceSecretFile(path, with: second + "\n")
            #expect(try await relay.call("token-invalidate")["result"]?["invalidated"]?.intValue == 1)
            let two = try await relay.call("request", ["path": "/b"])
            #expect(two["result"]?["json"]?["sub"]?.stringValue == "system:serviceaccount:ns:two", "\(two.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            let grants = try stack.popLedger("jwt_bearer")
            #expect(
                grants.map { $0["sub"]?.stringValue } == [
                    "system:serviceaccount:ns:one", "system:serviceaccount:ns:two",
                ])
            #expect(try stack.popLedger("refused").isEmpty)
            for assertion in [first, second] {
                #expect(!relay.stdoutText.contains(assertion) && !relay.stderrText.contains(assertion))
            }
        }
    }

    /// RFC 7523 §3.1: client authentication is optional for the jwt-bearer grant (SPEC §10). A
    /// profile without `client_id` is served, and its token request names no client at all (the
    /// server takes such requests only when they carry no client_id, secret or assertion).
    @Test func jwtBearerWithoutAClientIDNamesNoClient() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            let issuerKey = try await stack.makeKey("ec", name: "cluster")
            try stack.trustAssertionIssuer("cluster", publicPEM: issuerKey.publicPEM)
            try Data().write(to: stack.popState.appendingPathComponent("anonymous-jwt-bearer"))
            let path = stack.stateDirectory.appendingPathComponent("sa-token").path
            let assertion = try await stack.mintAssertion(
                key: issuerKey, issuer: "cluster", subject: "system:serviceaccount:ns:anon", audience: stack.popURL)
            try stack.replaceSecretFile(path, with: assertion + "\n")
            let relay = try stack.startPopRelay(profiles: [
                (
                    "workload",
                    ["type: jwt_bearer", "token_url: \(stack.popTokenURL)", "assertion: { file: \(path) }"]
                )
            ])
            let answer = try await relay.call("request", ["path": "/a"])
            #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            #expect(answer["result"]?["json"]?["sub"]?.stringValue == "system:serviceaccount:ns:anon")
            let status = try await relay.call("status")
            #expect(status["error"] == nil, "\(status.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            let grants = try stack.popLedger("jwt_bearer")
            #expect(grants.count == 1)
            #expect(grants.first?["client"] == .null, "no client_id was sent: \(grants)")
            #expect(try stack.popLedger("refused").isEmpty)
            #expect(!relay.stdoutText.contains(assertion) && !relay.stderrText.contains(assertion))
        }
    }

    @Test func githubActionsOIDCTokenIsAskedForItsAudienceAndTraded() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            try stack.registerPopClient("ci", ["auth": "none"])
            let requestToken = "gha-request-\(UUID().uuidString)"
            try requestToken.write(
                to: stack.popState.appendingPathComponent("gha-request-token"), atomically: true, encoding: .utf8)
            let relay = try stack.startPopRelay(
                profiles: [
                    (
                        "ci",
                        [
                            "type: jwt_bearer", "token_url: \(stack.popTokenURL)", "client_id: ci",
                            "assertion: { github_actions: { audience: '\(stack.popURL)' } }",
                        ]
                    )
                ],
                environment: [
                    "ACTIONS_ID_TOKEN_REQUEST_URL": stack.popURL + "/gha/token?api-version=2.0",
                    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": requestToken,
                ])
            let answer = try await relay.call("request", ["path": "/a"])
            #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
            #expect(answer["result"]?["json"]?["sub"]?.stringValue == "repo:example/app:ref:refs/heads/main")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            #expect(try stack.popLedger("gha_token").map { $0["aud"]?.stringValue } == [stack.popURL])
            #expect(try stack.popLedger("jwt_bearer").count == 1)
            #expect(!relay.stderrText.contains(requestToken) && !relay.stdoutText.contains(requestToken))
        }
    }
}
