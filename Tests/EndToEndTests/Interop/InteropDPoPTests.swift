import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// DPoP (RFC 9449, SPEC §10) through the real binary against the strict proof-of-possession server
/// of the interop stack (scripts/interop/pop), which checks every proof as the RFC asks (signature
/// with the `jwk`, `typ`, `htm`, `htu`, `iat`, `jti` never reused, `ath`, nonces) and binds the
/// tokens it issues to the proof's key.
@Suite(.serialized) struct InteropDPoPTests {
    static let storeKey = "q2M0c0Ijh0N1xFNVgmvyS4n7cW6nWZ8Jm0mHcZVxV4Q="

    /// The DER of an EC private key (SEC 1) begins with these bytes, in any base64 alphabet: a
    /// DPoP key's mark in any output or file.
    static let keyMarks = ["MHcCAQEEI", "307702010104"]

    static func profile(_ client: String, _ stack: InteropStack, extra: [String] = []) -> [String] {
        [
            "type: client_credentials", "token_url: \(stack.popTokenURL)", "client_id: \(client)",
            "client_auth: none", "dpop: true", "scopes: [read]",
        ] + extra
    }

    static func start(_ stack: InteropStack, _ profiles: [(name: String, lines: [String])], store: String)
        throws -> RelayProcess
    {
        try stack.startPopRelay(
            profiles: profiles, environment: ["TR_STORE_KEY": storeKey],
            store: "{ path: \(store), encryption_key: { env: TR_STORE_KEY } }")
    }

    static func proofs(_ stack: InteropStack, path: String) throws -> [JSONValue] {
        try stack.popLedger("dpop_proof").filter { $0["path"]?.stringValue == path }
    }

    @Test func nonceChallengesAtTheResourceAndTheTokenEndpointGetOneRetryEach() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            try stack.registerPopClient("dp-rs", ["auth": "none"])
            try stack.registerPopClient("dp-as", ["auth": "none", "dpop_nonce": true])
            let store = stack.stateDirectory.appendingPathComponent("dpop-store/sessions.db").path

            // The resource asks for a nonce (the token endpoint did not): a POST with a body is
            // signed again with it and sent once more; the server did not act on the first.
            let first = try Self.start(stack, [("service", Self.profile("dp-rs", stack))], store: store)
            let posted = try await first.call(
                "request", ["method": "POST", "path": "/orders", "json": ["item": "book"]])
            #expect(posted["result"]?["status"]?.intValue == 200, "\(posted.jsonText)")
            #expect(posted["result"]?["json"]?["scheme"]?.stringValue == "DPoP")
            #expect(posted["result"]?["json"]?["method"]?.stringValue == "POST")
            let jkt = try #require(posted["result"]?["json"]?["jkt"]?.stringValue)
            // The ledger keeps the proofs the server accepted: the one sent again, with the nonce.
            let resourceProofs = try Self.proofs(stack, path: "/resource/orders")
            #expect(resourceProofs.count == 1)
            #expect(resourceProofs.first?["nonce"]?.stringValue != nil)
            #expect(resourceProofs.allSatisfy { $0["ath"]?.boolValue == true && $0["jkt"]?.stringValue == jkt })
            #expect(try stack.popLedger("resource_refused").map { $0["error"]?.stringValue } == ["use_dpop_nonce"])
            // The token request carried a proof with the same key, and no `ath`.
            let tokenProofs = try Self.proofs(stack, path: "/token")
            #expect(tokenProofs.count == 1 && tokenProofs.first?["ath"]?.boolValue == false)
            #expect(tokenProofs.first?["jkt"]?.stringValue == jkt)
            try first.closeStdin()
            #expect(try await first.exitCode() == 0)

            // The token endpoint asks for a nonce: one retry with it; a second process on the same
            // store then uses the stored token and the same key (one token, one thumbprint).
            let second = try Self.start(stack, [("service", Self.profile("dp-as", stack))], store: store)
            let got = try await second.call("request", ["path": "/a"])
            #expect(got["result"]?["status"]?.intValue == 200, "\(got.jsonText)")
            let asJKT = try #require(got["result"]?["json"]?["jkt"]?.stringValue)
            let asProofs = try Self.proofs(stack, path: "/token").filter { $0["jkt"]?.stringValue == asJKT }
            #expect(asProofs.count == 1)
            #expect(asProofs.first?["nonce"]?.stringValue != nil)
            let third = try Self.start(stack, [("service", Self.profile("dp-as", stack))], store: store)
            let shared = try await third.call("request", ["path": "/b"])
            #expect(shared["result"]?["status"]?.intValue == 200, "\(shared.jsonText)")
            #expect(shared["result"]?["json"]?["jkt"]?.stringValue == asJKT)
            #expect(try stack.popLedger("issued").filter { $0["client"]?.stringValue == "dp-as" }.count == 1)

            // logout drops the key: the next token is bound to a new one.
            let logout = try await third.call("logout", ["profile": "service"])
            #expect(logout["error"] == nil, "\(logout.jsonText)")
            let after = try await third.call("request", ["path": "/c"])
            #expect(after["result"]?["status"]?.intValue == 200, "\(after.jsonText)")
            let newJKT = after["result"]?["json"]?["jkt"]?.stringValue
            #expect(newJKT != nil && newJKT != asJKT)

            for relay in [second, third] {
                try relay.closeStdin()
                #expect(try await relay.exitCode() == 0)
            }
            // The key is in no output, and the sealed store holds it only sealed.
            let file = try Data(contentsOf: URL(fileURLWithPath: store))
            let fileText = String(decoding: file, as: UTF8.self)
            for relay in [first, second, third] {
                for mark in Self.keyMarks {
                    #expect(!relay.stdoutText.contains(mark) && !relay.stderrText.contains(mark))
                }
            }
            for mark in Self.keyMarks { #expect(!fileText.contains(mark)) }
        }
    }

    @Test func aBearerAnswerToADPoPRequestIsRefusedAndBoundTokensAreNeverHandedOut() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            try stack.registerPopClient("dp-down", ["auth": "none", "downgrade": true])
            try stack.registerPopClient("dp-ok", ["auth": "none"])
            let store = stack.stateDirectory.appendingPathComponent("dpop-store/sessions.db").path
            // Found through the server's metadata, so its revocation endpoint is known.
            let down = [
                "type: client_credentials", "issuer: \(stack.popURL)", "client_id: dp-down", "client_auth: none",
                "dpop: true", "scopes: [read]",
            ]
            let relay = try Self.start(
                stack,
                [
                    ("down", down),
                    ("exposed", Self.profile("dp-ok", stack, extra: ["expose_token: true"])),
                ], store: store)
            let refused = try await relay.call("request", ["path": "/a", "profile": "down"])
            #expect(refused["error"]?["data"]?["kind"]?.stringValue == "auth", "\(refused.jsonText)")
            #expect(refused["error"]?["message"]?.stringValue?.contains("downgrade") == true, "\(refused.jsonText)")
            #expect(try stack.popLedger("resource").isEmpty)  // the bearer token was never used
            // What the server issued for the refused answer is revoked, not left live and forgotten.
            let issued = try stack.popLedger("issued").filter { $0["client"]?.stringValue == "dp-down" }
            let revoked = try stack.popLedger("revoked").compactMap { $0["token"]?.stringValue }
            #expect(issued.count == 1 && issued.allSatisfy { revoked.contains($0["token"]?.stringValue ?? "-") })

            let handedOut = try await relay.call("token-get", ["profile": "exposed"])
            #expect(handedOut["error"]?["data"]?["kind"]?.stringValue == "not_supported", "\(handedOut.jsonText)")
            #expect(handedOut["error"]?["message"]?.stringValue?.contains("DPoP") == true)
            let used = try await relay.call("request", ["path": "/b", "profile": "exposed"])
            #expect(used["result"]?["status"]?.intValue == 200, "\(used.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }
}
