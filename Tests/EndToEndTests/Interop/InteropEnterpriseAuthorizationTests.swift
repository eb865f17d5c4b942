import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the strict proof-of-possession server (scripts/interop/pop) playing
/// both the person's enterprise IdP and the resource's authorization server: enterprise-managed
/// authorization (SPEC §9.9).
@Suite(.serialized) struct InteropEnterpriseAuthorizationTests {
    /// The person's ID token is exchanged at the IdP for an ID-JAG naming the jwt-bearer
    /// profile's server (its issuer) and resource, which that server takes in a jwt-bearer grant.
    /// The ID-JAG comes without `expires_in`; when the server refuses it the next time (its `jti`
    /// is spent), the IdP is asked for a fresh one, once.
    @Test func anIDJAGFromTheIdPIsPresentedAndAskedForAgainWhenSpent() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            let corp = try await stack.makeKey("ec", name: "corp")
            try stack.trustAssertionIssuer("corp", publicPEM: corp.publicPEM)
            try stack.registerPopClient("editor", ["auth": "none"])
            try stack.registerPopClient("mcp-client", ["auth": "none"])
            let path = stack.stateDirectory.appendingPathComponent("id-token").path
            let idToken = try await stack.mintAssertion(
                key: corp, issuer: "corp", subject: "alice@corp.example", audience: "editor")
            try stack.replaceSecretFile(path, with: idToken + "\n")
            let resource = stack.popURL + "/resource"
            let relay = try stack.startPopRelay(profiles: [
                (
                    "mcp",
                    [
                        "type: jwt_bearer", "issuer: \(stack.popURL)", "client_id: mcp-client",
                        "resource: \(resource)", "assertion: { profile: idp }",
                    ]
                ),
                (
                    "idp",
                    [
                        "type: token_exchange", "token_url: \(stack.popURL)/token", "client_id: editor",
                        "client_auth: none", "subject_token: { file: \(path) }", "subject_token_type: id_token",
                        "requested_token_type: id-jag",
                    ]
                ),
            ])
            let one = try await relay.call("request", ["path": "/a", "profile": "mcp"])
            #expect(one["result"]?["json"]?["sub"]?.stringValue == "alice@corp.example", "\(one.jsonText)")
            _ = try await relay.call("token-invalidate", ["profile": "mcp"])
            let two = try await relay.call("request", ["path": "/b", "profile": "mcp"])
            #expect(two["result"]?["json"]?["sub"]?.stringValue == "alice@corp.example", "\(two.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)

            let jags = try stack.popLedger("id_jag")
            #expect(jags.count == 2, "\(jags)")
            for jag in jags {
                #expect(jag["audience"]?.stringValue == stack.popURL && jag["resource"]?.stringValue == resource)
                #expect(jag["client"]?.stringValue == "editor" && jag["sub"]?.stringValue == "alice@corp.example")
            }
            let grants = try stack.popLedger("jwt_bearer")
            #expect(grants.count == 2 && grants.allSatisfy { $0["iss"]?.stringValue == "idjag" }, "\(grants)")
            #expect(grants.map { $0["jti"]?.stringValue }.count == Set(grants.map { $0["jti"]?.stringValue }).count)
            #expect(!relay.stdoutText.contains(idToken) && !relay.stderrText.contains(idToken))
        }
    }
}
