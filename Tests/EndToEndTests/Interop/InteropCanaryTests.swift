import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// A run at `--log-level trace` with every kind of OAuth exchange; afterwards no client secret and
/// no token the authorization server ever issued (read from its database) appears in stdout or stderr.
@Suite struct InteropCanaryTests {
    @Test func traceLevelRunLeaksNoSecretAndNoIssuedToken() async throws {
        try await InteropStack.with { stack in
            let seed = try await stack.mintRefreshToken()
            let relay = try stack.startRelay(
                profiles: [
                    ("basic", stack.clientCredentials(client: "svc", secretVariable: "SVC_SECRET")),
                    (
                        "post",
                        stack.clientCredentials(
                            client: "svcpost", secretVariable: "POST_SECRET", auth: "client_secret_post")
                    ),
                    (
                        "seeded",
                        [
                            "type: refresh_token", "token_url: \(stack.tokenURL)", "client_id: pwd",
                            "client_secret: { env: PWD_SECRET }", "refresh_token: { env: SEED }",
                        ]
                    ),
                ],
                environment: [
                    "SVC_SECRET": "svc-secret", "POST_SECRET": "svcpost-secret", "PWD_SECRET": "pwd-secret",
                    "SEED": seed,
                ],
                logLevel: "trace")
            for profile in ["basic", "post", "seeded"] {
                for round in 0..<2 {
                    let answer = try await relay.call("request", ["path": "/whoami", "profile": .string(profile)])
                    #expect(answer["result"]?["status"]?.intValue == 200, "\(profile) \(round): \(answer.jsonText)")
                    _ = try await relay.call("token-invalidate", ["profile": .string(profile)])
                }
                let echo = try await relay.call(
                    "request", ["method": "POST", "path": "/echo", "profile": .string(profile), "text": "x"])
                #expect(echo["result"]?["status"]?.intValue == 200)
            }
            _ = try await relay.call("status")
            let wrong = try stack.startRelay(
                profiles: [("basic", stack.clientCredentials(client: "svc", secretVariable: "SVC_SECRET"))],
                environment: ["SVC_SECRET": "wrong-canary-secret"], logLevel: "trace")
            _ = try await wrong.call("request", ["path": "/whoami"])
            try relay.closeStdin()
            try wrong.closeStdin()
            #expect(try await relay.exitCode() == 0)
            _ = try await wrong.exitCode()

            let tokens = try await stack.issuedValues(kind: "all")
            #expect(tokens.count >= 10, "the run issued \(tokens.count) tokens")
            let secrets = [
                "svc-secret", "svcpost-secret", "pwd-secret", "wrong-canary-secret",
                Data("svc:svc-secret".utf8).base64EncodedString(), Data("pwd:pwd-secret".utf8).base64EncodedString(),
            ]
            let outputs = [
                ("stdout", relay.stdoutText), ("stderr", relay.stderrText), ("stdout (wrong secret)", wrong.stdoutText),
                ("stderr (wrong secret)", wrong.stderrText),
            ]
            #expect(relay.stderrText.contains("/whoami"), "trace logging wrote nothing about the requests")
            for (name, text) in outputs {
                for canary in tokens + secrets {
                    #expect(!text.contains(canary), "\(name) contains a secret or token (\(canary.prefix(3))…)")
                }
            }
        }
    }
}
