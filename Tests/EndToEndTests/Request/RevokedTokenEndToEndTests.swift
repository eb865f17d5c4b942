import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// A `401 invalid_token` on the session's current token invalidates it whatever the method (SPEC
/// §5.3, clarified): a POST is not replayed, but the next request renews instead of sending the
/// revoked token again, and `status` and `tokenrelay token` see it (issue 34, finding 8). Also
/// `tokenrelay invalidate`, the `token-invalidate` method from a shell.
@Suite struct RevokedTokenEndToEndTests {
    /// The access token the API saw (its name, `at-N`), from a `call`'s body.
    static func token(_ stdout: String) -> String? {
        (try? JSONParser.parse(stdout))?["token"]?.stringValue
    }

    /// The state `tokenrelay status --json` gives profile `svc`.
    static func state(_ server: RotatingTokenServer) async throws -> String? {
        let status = try await server.run(["status", "--json"])
        #expect(status.code == 0, "\(status.stderr)")
        let sessions = try JSONParser.parse(status.stdout)["sessions"]?.arrayValue ?? []
        return sessions.first { $0["profile"] == "svc" }?["state"]?.stringValue
    }

    @Test func threeOneShotPostsWithARevokedTokenRenewAfterTheFirst() async throws {
        let server = try await RotatingTokenServer()
        let post = ["call", "POST", "/items", "--profile", "svc", "--json", "{}"]
        let first = try await server.run(post)
        #expect(first.code == 0, "\(first.stderr)")
        let revoked = try #require(Self.token(first.stdout))
        try await server.revokeAll()

        // The first POST after the revocation meets the 401 and is not replayed (it has a body)...
        let refused = try await server.run(post)
        #expect(refused.code == 4, "\(refused.stderr)")
        // ...and the session now needs renewal, in every process sharing the store.
        #expect(try await Self.state(server) == "expired")
        // The second carries a renewed token, and so does the third.
        let second = try await server.run(post)
        #expect(second.code == 0, "\(second.stderr)")
        let renewed = try #require(Self.token(second.stdout))
        #expect(renewed != revoked)
        let third = try await server.run(post)
        #expect(third.code == 0 && Self.token(third.stdout) == renewed, "\(third.stderr)")
        #expect(try await Self.state(server) == "valid")

        // The same after a refused POST for the credential helper: it never prints the revoked token.
        try await server.revokeAll()
        #expect(try await server.run(post).code == 4)
        let printed = try await server.run(["token", "--profile", "svc"])
        #expect(printed.code == 0, "\(printed.stderr)")
        #expect(!printed.stdout.isEmpty && printed.stdout != renewed + "\n")
    }

    @Test func threePostsInOneServeRenewAfterTheFirst() async throws {
        let server = try await RotatingTokenServer()
        let client = try RelayClient(
            config: try String(contentsOfFile: server.configPath, encoding: .utf8),
            environment: ["ROTATING_SECRET": RotatingTokenServer.clientSecret])
        let post = #"{"method":"POST","path":"/items","profile":"svc","json":{}}"#
        let first = try await client.request(post)
        #expect(first["result"]?["status"] == .int(200), "\(first)")
        try await server.revokeAll()
        var statuses: [Int?] = []
        for _ in 0..<3 {
            statuses.append(try await client.request(post)["result"]?["status"]?.numberValue?.intValue)
        }
        #expect(statuses == [401, 200, 200])
        #expect(try await client.finish() == 0)
    }

    @Test func invalidateFromAShellMakesEveryProcessRenew() async throws {
        let server = try await RotatingTokenServer()
        let get = ["call", "GET", "/items", "--profile", "svc"]
        let first = try await server.run(get)
        #expect(first.code == 0, "\(first.stderr)")
        #expect(try await Self.state(server) == "valid")

        let invalidated = try await server.run(["invalidate", "--profile", "svc"])
        #expect(invalidated.code == 0, "\(invalidated.stderr)")
        #expect(invalidated.stderr.contains("invalidated 1 session(s)"))
        #expect(try await Self.state(server) == "expired")
        let next = try await server.run(get)
        #expect(next.code == 0 && Self.token(next.stdout) != Self.token(first.stdout), "\(next.stderr)")
        #expect(try await Self.state(server) == "valid")

        // The selection is `logout`'s: an unknown profile is refused, a usage error is 2.
        #expect(try await server.run(["invalidate", "--profile", "nope"]).code != 0)
        #expect(try await server.run(["invalidate", "--bogus"]).code == 2)
        #expect(try await server.run(["invalidate", "--all"]).code == 0)
    }
}
