import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `refresh_token` profiles against the real authorization server, which rotates refresh tokens
/// and (reuse protection on) revokes the whole family when a rotated one is replayed.
@Suite(.serialized) struct InteropRefreshTokenTests {
    /// A seeded client: confidential with Basic, or public with no client authentication.
    struct SeedCase: Sendable, CustomTestStringConvertible {
        let client: String
        let secret: String?
        var testDescription: String {
            secret == nil ? "public client, token_url, none" : "confidential client, issuer, basic"
        }

        func profile(_ stack: InteropStack) -> [String] {
            var lines = ["type: refresh_token", "client_id: \(client)"]
            if secret != nil {
                lines += [
                    "issuer: \(stack.issuer)", "client_secret: { env: SECRET }", "client_auth: client_secret_basic",
                ]
            } else {
                // The AS's metadata lists only client_secret_basic/post in
                // token_endpoint_auth_methods_supported (although it accepts public clients), and
                // tokenrelay honours that list, so the public client names its token endpoint.
                lines += ["token_url: \(stack.tokenURL)", "client_auth: none"]
            }
            return lines + ["refresh_token: { env: SEED }"]
        }

        func environment(seed: String) -> [String: String] {
            var environment = ["SEED": seed]
            if let secret { environment["SECRET"] = secret }
            return environment
        }
    }

    static let seedCases = [SeedCase(client: "pwd", secret: "pwd-secret"), SeedCase(client: "pwdpub", secret: nil)]

    @Test(arguments: seedCases)
    func rotationAcrossRepeatedInvalidationsNeverReplaysARotatedToken(_ seedCase: SeedCase) async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let seed = try await stack.mintRefreshToken(client: seedCase.client, secret: seedCase.secret)
            let relay = try stack.startRelay(
                profiles: [("seeded", seedCase.profile(stack))], environment: seedCase.environment(seed: seed))
            let cycles = 5
            for cycle in 0..<cycles {
                if cycle > 0 {
                    let invalidated = try await relay.call("token-invalidate", ["profile": "seeded"])
                    #expect(invalidated["result"]?["invalidated"]?.intValue == 1, "\(invalidated.jsonText)")
                }
                let answer = try await relay.call("request", ["path": "/whoami"])
                #expect(answer["result"]?["status"]?.intValue == 200, "cycle \(cycle): \(answer.jsonText)")
                #expect(answer["result"]?["json"]?["username"]?.stringValue == "alice")
                // The seed plus one rotation per cycle: every renewal used the newest refresh token.
                #expect(try await stack.issuedCount(client: seedCase.client, kind: "refresh") == cycle + 2)
            }
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "valid", "\(session?.jsonText ?? "")")
            #expect(session?["refreshable"]?.boolValue == true)
            #expect(session?["lastError"] == nil)
            #expect((session?["counters"]?["renewals"]?.intValue ?? 0) >= cycles - 1)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            #expect(!relay.stdoutText.contains("invalid_grant"))
            #expect(!relay.stderrText.contains("invalid_grant"))
        }
    }

    @Test func twoHundredConcurrentRequestsAtColdStartRedeemTheSeedOnce() async throws {
        try await InteropStack.with(.init(reuseProtection: true, rsCache: 60)) { stack in
            let seedCase = Self.seedCases[0]
            let seed = try await stack.mintRefreshToken(client: seedCase.client, secret: seedCase.secret)
            let relay = try stack.startRelay(
                profiles: [("seeded", seedCase.profile(stack))], environment: seedCase.environment(seed: seed))
            let callers = 200
            var batch = ""
            for id in 0..<callers {
                batch += #"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/whoami"}}"# + "\n"
            }
            let start = ContinuousClock.now
            try relay.write(batch)
            let lines = try await relay.lines(atLeast: callers, timeout: .seconds(300))
            let wall = ContinuousClock.now - start
            for line in lines {
                #expect(line["result"]?["status"]?.intValue == 200, "\(line.jsonText)")
            }
            // The password grant minted one access and one refresh token; the storm one more of each.
            let access = try await stack.issuedCount(client: "pwd", kind: "access")
            #expect(access == 2)
            #expect(try await stack.issuedCount(client: "pwd", kind: "refresh") == 2)
            print(
                "storm (refresh_token): \(callers) concurrent callers at cold start, \(access - 1) refresh call(s), wall time \(wall)"
            )
        }
    }

    @Test func callersTimingOutDuringARefreshNeverLoseTheRotatedToken() async throws {
        try await InteropStack.with(.init(reuseProtection: true)) { stack in
            let seedCase = Self.seedCases[0]
            let seed = try await stack.mintRefreshToken(client: seedCase.client, secret: seedCase.secret)
            let relay = try stack.startRelay(
                profiles: [("seeded", seedCase.profile(stack))], environment: seedCase.environment(seed: seed))
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            // Time bounds that end before, during and after the refresh exchange: whichever phase
            // the caller leaves in, a refresh that was sent is committed, so the next one works.
            // A refresh that was sent is committed even when its caller timed out (SPEC §5.2).
            for bound in [1, 15, 40, 80, 150, 300] {
                let invalidated = try await relay.call("token-invalidate", ["profile": "seeded"])
                #expect(invalidated["result"]?["invalidated"]?.intValue == 1)
                let hurried = try await relay.call("request", ["path": "/whoami", "timeoutMs": .int(bound)])
                let kind = hurried["error"]?["data"]?["kind"]?.stringValue
                #expect(hurried["result"] != nil || kind == "timeout", "\(bound) ms: \(hurried.jsonText)")
                let next = try await relay.call("request", ["path": "/whoami"])
                #expect(next["result"]?["status"]?.intValue == 200, "after a \(bound) ms caller: \(next.jsonText)")
                if next["result"] == nil { break }
            }
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "valid", "\(session?.jsonText ?? "")")
        }
    }

    @Test func logoutRevokesTheSessionsTokensAtTheServer() async throws {
        try await InteropStack.with { stack in
            let seedCase = Self.seedCases[0]
            let seed = try await stack.mintRefreshToken(client: seedCase.client, secret: seedCase.secret)
            let relay = try stack.startRelay(
                profiles: [("seeded", seedCase.profile(stack))], environment: seedCase.environment(seed: seed))
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            let refresh = try await stack.issuedValues(client: "pwd", kind: "refresh").last ?? ""
            let access = try await stack.issuedValues(client: "pwd", kind: "access").last ?? ""

            let loggedOut = try await relay.call("logout", ["profile": "seeded"])
            #expect(loggedOut["result"]?["loggedOut"]?.intValue == 1, "\(loggedOut.jsonText)")
            // `logout` revokes the session's tokens at the AS's RFC 7009 endpoint (SPEC §4.3).
            let direct = try await stack.curl(["-sS", "-H", "Authorization: Bearer \(access)", "\(stack.rsURL)/whoami"])
            let replay = try await stack.postForm(
                stack.tokenURL, user: "pwd", password: "pwd-secret",
                fields: ["grant_type=refresh_token", "refresh_token=\(refresh)"])
            #expect(direct.status == 401, "the access token still works after logout")
            #expect(replay.status == 400, "the refresh token still works after logout")
            let after = try await relay.call("request", ["path": "/whoami"])
            #expect(after["error"]?["data"]?["kind"]?.stringValue == "interaction_required", "\(after.jsonText)")
        }
    }

    @Test func refusedRenewalIsInteractionRequiredWithAnAuthFailedNotification() async throws {
        try await InteropStack.with { stack in
            let seedCase = Self.seedCases[0]
            let seed = try await stack.mintRefreshToken(client: seedCase.client, secret: seedCase.secret)
            let relay = try stack.startRelay(
                profiles: [("seeded", seedCase.profile(stack))], environment: seedCase.environment(seed: seed))
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            let refreshTokens = try await stack.issuedValues(client: "pwd", kind: "refresh")
            #expect(refreshTokens.count == 2)
            if let current = refreshTokens.last {
                try await stack.revoke(current, hint: "refresh_token", client: "pwd", secret: "pwd-secret")
            }
            #expect(
                try await relay.call("token-invalidate", ["profile": "seeded"])["result"]?["invalidated"]?.intValue == 1
            )

            let failed = try await relay.call("request", ["path": "/whoami"])
            #expect(failed["error"]?["code"]?.intValue == -32011, "\(failed.jsonText)")
            #expect(failed["error"]?["data"]?["kind"]?.stringValue == "interaction_required")
            let notification = try await relay.firstLine(timeout: .seconds(60), what: "auth-failed") {
                $0["method"]?.stringValue == "auth-failed"
            }
            #expect(notification["id"] == nil)
            #expect(notification["params"]?["environment"]?.stringValue == "interop")
            #expect(notification["params"]?["profile"]?.stringValue == "seeded")
            #expect(notification["params"]?["kind"]?.stringValue == "interaction_required", "\(notification.jsonText)")
            let session = try await relay.call("status")["result"]?["sessions"]?.arrayValue?.first
            #expect(session?["state"]?.stringValue == "interaction_required", "\(session?.jsonText ?? "")")
        }
    }
}
