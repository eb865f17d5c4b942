import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `request` and `subscribe` go through one client pipeline (SPEC §5.3, §5.5): the same origin
/// policy, environment headers and credentials middleware with its 401 recovery, through the real
/// binary against wire_server listeners that record every request. Each case runs for both
/// methods and expects the same wire.
@Suite struct PipelineEndToEndTests {
    static let clientSecret = "canary-pipeline-secret-61f0a2"
    static let environmentHeader = "pipeline-env-header"

    /// How one method performs an exchange: `request` answers once; `subscribe` waits for the
    /// subscription's first event (or its `closed`) and unsubscribes.
    enum Method: String, CaseIterable, CustomStringConvertible {
        case request, subscribe

        var description: String { rawValue }

        /// Runs the method with `params`; returns the reply (`request`) or the subscription's
        /// notifications up to its first event (`subscribe`).
        func exchange(_ relay: RelayProcess, _ params: JSONValue) async throws -> [JSONValue] {
            switch self {
            case .request:
                return [try await relay.call("request", params)]
            case .subscribe:
                let sub = try await relay.subscribe(params)
                let lines = try await relay.waitForLines(what: "the first event of \(sub)") { lines in
                    lines.notifications(of: sub).contains {
                        $0["method"] == "event" || $0["params"]?["state"] == "closed"
                    }
                }
                _ = try await relay.call("unsubscribe", ["subscription": .string(sub)])
                return lines.notifications(of: sub)
            }
        }

        /// Whether the exchange succeeded: a 200 result, or an event delivered.
        func succeeded(_ outcome: [JSONValue]) -> Bool {
            switch self {
            case .request: outcome.first?["result"]?["status"] == .int(200)
            case .subscribe: outcome.contains { $0["method"] == "event" && $0["params"]?["data"] == "hello" }
            }
        }
    }

    struct Setup {
        let wire: WireServer
        let client: RelayClient

        init() async throws {
            wire = try await WireServer(["api", "other"])
            client = try RelayClient(
                config: """
                    version: 1
                    environments:
                      local:
                        base_url: \(wire.origin("api"))
                        default_profile: oauth
                        headers:
                          X-Env: \(environmentHeader)
                        profiles:
                          oauth:
                            type: client_credentials
                            token_url: \(wire.origin("api"))/token
                            client_id: pipeline
                            client_secret: { env: E2E_SECRET }
                    """, environment: ["E2E_SECRET": clientSecret], arguments: ["--log-level", "trace"])
        }

        /// The resource requests `listener` received on `path` (token requests aside).
        func requests(_ listener: String, path: String) throws -> [JSONValue] {
            try wire.requests(listener).filter { $0["target"]?.stringValue == path }
        }
    }

    @Test(arguments: Method.allCases)
    func credentialsAndEnvironmentHeadersGoOnlyToTheEnvironmentsOrigin(method: Method) async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        let own = try await method.exchange(relay, ["path": "/events"])
        #expect(method.succeeded(own), "\(own)")
        let other = try await method.exchange(relay, ["url": .string("\(setup.wire.origin("other"))/events")])
        #expect(method.succeeded(other), "\(other)")

        let signed = try #require(try setup.requests("api", path: "/events").first)
        let token = try #require(signed.header("Authorization").first)
        #expect(token.hasPrefix("Bearer tok-api-"))
        #expect(signed.header("X-Env") == [Self.environmentHeader])
        let unsigned = try #require(try setup.requests("other", path: "/events").first)
        #expect(unsigned.header("Authorization").isEmpty)
        #expect(unsigned.header("X-Env").isEmpty)
        #expect(try !setup.wire.rawText("other").contains(token.dropFirst("Bearer ".count)))
        _ = try await setup.client.finish()
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.clientSecret], relay)
    }

    @Test(arguments: Method.allCases)
    func perCallHeadersWinOverEnvironmentHeadersAndAnAuthorizationHeaderIsRefused(method: Method) async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        let outcome = try await method.exchange(relay, ["path": "/events", "headers": ["x-env": "mine"]])
        #expect(method.succeeded(outcome), "\(outcome)")
        let sent = try #require(try setup.requests("api", path: "/events").first)
        #expect(sent.header("X-Env") == ["mine"])

        let refused = try await relay.call(method.rawValue, ["path": "/events", "headers": ["Authorization": "x"]])
        #expect(refused["error"]?["code"] == .int(-32602), "\(refused.jsonText)")
        #expect(
            try setup.wire.requests("api").allSatisfy { $0.header("Authorization") != ["x"] },
            "the refused call was sent")
        _ = try await setup.client.finish()
    }

    @Test(arguments: Method.allCases)
    func anInvalidTokenIsRenewedAndTheCallReplayedOnceWithTheNewToken(method: Method) async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        let outcome = try await method.exchange(relay, ["path": "/reject-first/events"])
        #expect(method.succeeded(outcome), "\(outcome)")

        let attempts = try setup.requests("api", path: "/reject-first/events")
        let tokens = attempts.prefix(2).map { $0.header("Authorization") }
        #expect(attempts.count >= 2)
        #expect(tokens.count == 2 && tokens[0] != tokens[1], "the replay carried the renewed token: \(tokens)")
        #expect(try setup.wire.requests("api").filter { $0["target"] == "/token" }.count == 2)
        let tokenValues = tokens.compactMap { $0.first }.map { String($0.dropFirst("Bearer ".count)) }
        if method == .subscribe {
            // The replay is announced like every reconnect, before the connection opens.
            let states = outcome.filter { $0["method"] == "subscription-state" }.map { $0["params"] ?? .null }
            let reconnect = try #require(states.first { $0["state"] == "reconnecting" })
            #expect(reconnect["status"] == .int(401) && reconnect["retryInMs"] == .int(0))
            #expect(reconnect["error"]?["kind"] == "auth")
            let order = Array(states.compactMap { $0["state"]?.stringValue }.prefix(4))
            #expect(order == ["connecting", "reconnecting", "connecting", "open"])
        }
        _ = try await setup.client.finish()
        // Both attempts were logged at trace (the stream's too), never with a token.
        #expect(relay.stderrText.components(separatedBy: "reject-first/events").count - 1 >= 4)
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.clientSecret] + tokenValues, relay)
    }
}
