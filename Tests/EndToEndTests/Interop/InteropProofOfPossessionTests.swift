import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the strict proof-of-possession server of the interop stack
/// (scripts/interop/pop): private_key_jwt client authentication, checked there as RFC 7523 asks
/// (signature, iss/sub/aud/exp, lifetime, jti never reused).
@Suite(.serialized) struct InteropProofOfPossessionTests {
    struct KeyCase: Sendable, CustomTestStringConvertible {
        let type: String
        let algorithm: String?
        let expected: String
        var testDescription: String { "\(type) \(algorithm ?? "default")" }
    }

    static let keyCases = [
        KeyCase(type: "ec", algorithm: nil, expected: "ES256"),
        KeyCase(type: "rsa", algorithm: nil, expected: "RS256"),
        KeyCase(type: "rsa", algorithm: "PS256", expected: "PS256"),
    ]

    @Test(arguments: keyCases)
    func privateKeyJWTGetsTokensWithAFreshAssertionEachTimeAndNoSecret(_ keyCase: KeyCase) async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            let key = try await stack.makeKey(keyCase.type, name: "client")
            try stack.registerPopClient(
                "pkj", ["auth": "private_key_jwt", "key_pem": .string(key.publicPEM), "kid": "k1"])
            var lines = [
                "type: client_credentials", "issuer: \(stack.popURL)", "client_id: pkj",
                "client_auth: private_key_jwt", "client_key: { file: \(key.privatePath) }", "client_key_id: k1",
                "scopes: [read]",
            ]
            if let algorithm = keyCase.algorithm { lines.append("client_key_alg: \(algorithm)") }
            let relay = try stack.startPopRelay(profiles: [("service", lines)])
            let first = try await relay.call("request", ["path": "/a"])
            #expect(first["result"]?["status"]?.intValue == 200, "\(first.jsonText)")
            #expect(first["result"]?["json"]?["client"]?.stringValue == "pkj")
            #expect(try await relay.call("token-invalidate")["result"]?["invalidated"]?.intValue == 1)
            let second = try await relay.call("request", ["path": "/b"])
            #expect(second["result"]?["status"]?.intValue == 200, "\(second.jsonText)")
            let logout = try await relay.call("logout", ["profile": "service"])
            #expect(logout["error"] == nil, "\(logout.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)

            let authentications = try stack.popLedger("client_auth")
            // Two token requests and the revocation at logout, each with an assertion of its own.
            #expect(authentications.map { $0["path"]?.stringValue } == ["/token", "/token", "/revoke"])
            #expect(authentications.allSatisfy { $0["alg"]?.stringValue == keyCase.expected })
            #expect(authentications.allSatisfy { $0["kid"]?.stringValue == "k1" })
            #expect(authentications.allSatisfy { $0["aud"]?.stringValue == stack.popTokenURL })
            #expect(authentications.allSatisfy { ($0["lifetime"]?.numberValue?.doubleValue ?? 99) <= 60 })
            let jtis = authentications.compactMap { $0["jti"]?.stringValue }
            #expect(Set(jtis).count == 3)
            #expect(try stack.popLedger("refused").isEmpty)
            for line in pemBodyLines(key.privatePEM) {
                #expect(!relay.stdoutText.contains(line) && !relay.stderrText.contains(line))
            }
        }
    }

    @Test func aKeyThatIsNotAPrivateKeyIsAConfigErrorNamingTheKey() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            let key = try await stack.makeKey("ec", name: "client")
            let publicPath = stack.stateDirectory.appendingPathComponent("public.pem").path
            try key.publicPEM.write(toFile: publicPath, atomically: true, encoding: .utf8)
            let relay = try stack.startPopRelay(profiles: [
                (
                    "service",
                    [
                        "type: client_credentials", "token_url: \(stack.popTokenURL)", "client_id: pkj",
                        "client_auth: private_key_jwt", "client_key: { file: \(publicPath) }",
                    ]
                )
            ])
            let answer = try await relay.call("request", ["path": "/a"])
            #expect(answer["error"]?["data"]?["kind"]?.stringValue == "config", "\(answer.jsonText)")
            #expect(answer["error"]?["message"]?.stringValue?.contains("client_key") == true, "\(answer.jsonText)")
            #expect(try stack.popLedger("client_auth").isEmpty)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
        }
    }
}
