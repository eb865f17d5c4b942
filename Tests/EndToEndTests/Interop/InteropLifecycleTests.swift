import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary against the real stack over time: short-lived tokens renewed proactively,
/// an authorization server that goes away and comes back.
@Suite(.serialized) struct InteropLifecycleTests {
    @Test func shortLivedTokensAreRenewedAHandfulOfTimesNotPerRequest() async throws {
        try await InteropStack.with(.init(accessTTL: 2)) { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            // The scenario itself: one request every 250 ms for 7 s.
            let count = 28
            let clock = ContinuousClock()
            let start = clock.now
            for id in 0..<count {
                try relay.send(#"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/whoami"}}"#)
                try await clock.sleep(until: start + .milliseconds(250 * (id + 1)))
            }
            let lines = try await relay.lines(atLeast: count, timeout: .seconds(120))
            for line in lines {
                #expect(line["result"]?["status"]?.intValue == 200, "\(line.jsonText)")
            }
            let issued = try await stack.issuedCount(client: "svc")
            #expect(issued >= 2, "a 2 s token cannot serve 7 s")
            #expect(issued <= count / 2, "\(issued) tokens for \(count) requests")
            print("expiry: \(count) requests over 7 s with 2 s tokens, \(issued) tokens issued")
        }
    }

    /// Whether the AS goes away before tokenrelay ever reached it (discovery pending) or after a
    /// token was issued (discovery done; the token endpoint itself is unreachable).
    enum OutageCase: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case beforeFirstToken
        case afterFirstToken
        var testDescription: String { rawValue }
    }

    @Test(arguments: OutageCase.allCases)
    func stoppedAuthorizationServerIsAnErrorWithinTheTimeoutAndItsReturnWorks(_ outage: OutageCase) async throws {
        try await InteropStack.with { stack in
            let relay = try stack.startRelay(
                profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                environment: ["SECRET": "svc-secret"])
            var issuedBefore = 0
            if outage == .afterFirstToken {
                #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
                #expect(try await relay.call("token-invalidate")["result"]?["invalidated"]?.intValue == 1)
                issuedBefore = 1
            }
            try await stack.stopAuthorizationServer()

            let timeoutMs = 4000
            let start = ContinuousClock.now
            let failed = try await relay.call(
                "request", ["path": "/whoami", "timeoutMs": .int(timeoutMs)], timeout: .seconds(60))
            let elapsed = ContinuousClock.now - start
            let kind = failed["error"]?["data"]?["kind"]?.stringValue
            #expect(kind == "transport" || kind == "timeout", "\(failed.jsonText)")
            #expect(
                elapsed < .milliseconds(timeoutMs) + .seconds(20), "answered \(elapsed) after a \(timeoutMs) ms bound")
            #expect(try await stack.issuedCount() == issuedBefore)
            print(
                "outage (\(outage)): AS down, answered with kind \(kind ?? "-") after \(elapsed) (bound \(timeoutMs) ms)"
            )

            try await stack.startAuthorizationServer()
            let recovered = try await relay.call("request", ["path": "/whoami"])
            #expect(recovered["result"]?["status"]?.intValue == 200, "\(recovered.jsonText)")
            #expect(try await stack.issuedCount(client: "svc") == issuedBefore + 1)
        }
    }
}
