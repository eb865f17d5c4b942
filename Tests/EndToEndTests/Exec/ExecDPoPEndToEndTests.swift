import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay exec` in front of an API that requires DPoP (RFC 9449): the interop stack's strict
/// proof-of-possession server checks every proof, binds its tokens to the proof's key and asks
/// the resource's first request for a nonce. curl, the child, sends a plain POST with the
/// placeholder; the relay signs it, answers the nonce challenge by signing again, and sends once more.
@Suite(.serialized) struct ExecDPoPEndToEndTests {
    @Test func aDPoPBoundTokenIsUsedForThePlainChild() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            try stack.registerPopClient("dp-exec", ["auth": "none"])
            let config = try stack.writeConfig(
                profiles: [
                    (
                        "service",
                        [
                            "type: client_credentials", "token_url: \(stack.popTokenURL)", "client_id: dp-exec",
                            "client_auth: none", "dpop: true", "scopes: [read]",
                        ]
                    )
                ], store: "{ type: memory }", baseURL: stack.popURL + "/resource")
            let process = try RelayProcess(
                [
                    "exec", "--config", config, "--env", "interop", "--", "/bin/sh", "-c",
                    #"curl -sS -H "Authorization: Bearer $TOKENRELAY_TOKEN" -H 'Content-Type: application/json' -d '{"item":"book"}' "$TOKENRELAY_URL/orders""#,
                ], testMethods: false)
            try process.closeStdin()
            #expect(try await process.exitCode() == 0, "\(process.stderrText)")
            let answer = try JSONParser.parse(process.stdoutText)
            #expect(answer["scheme"]?.stringValue == "DPoP", "\(process.stdoutText)")
            #expect(answer["method"]?.stringValue == "POST")
            let proofs = try stack.popLedger("dpop_proof").filter { $0["path"]?.stringValue == "/resource/orders" }
            #expect(proofs.count == 1 && proofs.first?["nonce"]?.stringValue != nil)
            #expect(try stack.popLedger("resource_refused").map { $0["error"]?.stringValue } == ["use_dpop_nonce"])
        }
    }
}
