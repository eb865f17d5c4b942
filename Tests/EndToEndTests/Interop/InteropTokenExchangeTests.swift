import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the strict proof-of-possession server (scripts/interop/pop): token
/// exchange (RFC 8693) whose subject is another profile's token.
@Suite(.serialized) struct InteropTokenExchangeTests {
    @Test func afterTheSubjectProfileRenewsTheNextExchangePresentsTheNewToken() async throws {
        try await InteropStack.with(.init(pop: true)) { stack in
            try stack.registerPopClient("subj", ["auth": "none"])
            try stack.registerPopClient("xc", ["auth": "none"])
            let relay = try stack.startPopRelay(profiles: [
                (
                    "exchanged",
                    [
                        "type: token_exchange", "issuer: \(stack.popURL)", "client_id: xc",
                        "subject: { profile: base }",
                        "subject_token_type: access_token", "requested_token_type: access_token",
                        "audience: https://downstream.example", "scopes: [read]",
                    ]
                ),
                ("base", ["type: client_credentials", "issuer: \(stack.popURL)", "client_id: subj", "scopes: [read]"]),
            ])
            let first = try await relay.call("request", ["path": "/a", "profile": "exchanged"])
            #expect(first["result"]?["json"]?["client"]?.stringValue == "xc", "\(first.jsonText)")
            // The subject renews...
            _ = try await relay.call("token-invalidate", ["profile": "base"])
            let base = try await relay.call("request", ["path": "/b", "profile": "base"])
            #expect(base["result"]?["json"]?["client"]?.stringValue == "subj", "\(base.jsonText)")
            // ...and the next exchange presents its new token.
            _ = try await relay.call("token-invalidate", ["profile": "exchanged"])
            let second = try await relay.call("request", ["path": "/c", "profile": "exchanged"])
            #expect(second["result"]?["status"]?.intValue == 200, "\(second.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)

            let issued = try stack.popLedger("issued")
            let subjectTokens = issued.filter { $0["client"]?.stringValue == "subj" }.compactMap {
                $0["token"]?.stringValue
            }
            let exchanges = issued.filter { $0["grant"]?.stringValue == "token_exchange" }
            #expect(subjectTokens.count == 2)
            #expect(exchanges.compactMap { $0["subject_token"]?.stringValue } == subjectTokens)
            #expect(exchanges.allSatisfy { $0["audience"]?.arrayValue == [.string("https://downstream.example")] })
            #expect(try stack.popLedger("refused").isEmpty)
        }
    }
}
