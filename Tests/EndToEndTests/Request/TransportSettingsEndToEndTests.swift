import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Proxies and private CAs through the real binary (SPEC §5.2): loopback never goes through a
/// proxy, the proxy variables keep applying elsewhere; an environment's token traffic uses its
/// `ca_file` (and proxy, connect timeout); a certificate failure is final (one attempt).
@Suite struct TransportSettingsEndToEndTests {
    static let secret = "canary-proxy-client-secret-91fa"

    @Test func loopbackTokenEndpointsAndAPIsNeverGoThroughAProxyWhileOtherDestinationsDo() async throws {
        let wire = try await WireServer(["api", "proxy"])
        let proxy = wire.origin("proxy")
        let client = try RelayClient(
            config: """
                version: 1
                default_environment: local
                environments:
                  local:
                    base_url: \(wire.origin("api"))/api
                    default_profile: svc
                    connect_timeout: 3s
                    profiles:
                      svc:
                        type: client_credentials
                        token_url: \(wire.origin("api"))/token
                        client_id: svc
                        client_secret: { env: E2E_SECRET }
                  configured:
                    base_url: http://api.proxied.invalid
                    proxy: \(proxy)
                """,
            environment: [
                "E2E_SECRET": Self.secret, "http_proxy": proxy, "https_proxy": proxy, "ALL_PROXY": proxy,
                "all_proxy": proxy, "NO_PROXY": "nothere.invalid", "no_proxy": "nothere.invalid",
            ])
        let relay = client.relay
        let first = try await relay.call("request", ["path": "/x"])
        #expect(
            try wire.request(answeredBy: first)?.header("Authorization").first?.hasPrefix("Bearer tok-api-") == true)
        let byName = try await relay.call(
            "request", ["url": .string("http://localhost:\(wire.port("api"))/by-name"), "auth": false])
        #expect(byName["result"]?["json"]?["listener"] == "api")
        #expect(try wire.accepts("proxy") == 0, "a loopback destination went through the proxy")
        #expect(try wire.rawText("api").contains(Self.secret) || (try wire.rawText("api").contains("Basic ")))

        // Everything else still goes through the proxies: the variables, and the `proxy` key.
        let elsewhere = try await relay.call("request", ["url": "http://elsewhere.invalid/z", "auth": false])
        #expect(elsewhere["result"]?["json"]?["listener"] == "proxy", "\(elsewhere.jsonText)")
        let configured = try await relay.call("request", ["environment": "configured", "path": "/p"])
        #expect(configured["result"]?["json"]?["listener"] == "proxy", "\(configured.jsonText)")
        // NO_PROXY keeps applying: this one goes direct (and fails to resolve), not to the proxy.
        let excluded = try await relay.call("request", ["url": "http://nothere.invalid/n", "auth": false])
        #expect(excluded["error"] != nil)
        let targets = try wire.requests("proxy").compactMap { $0["target"]?.stringValue }
        #expect(targets == ["http://elsewhere.invalid/z", "http://api.proxied.invalid/p"])
        #expect(!(try wire.rawText("proxy").contains(Self.secret)))
        _ = try await client.finish()
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.secret], relay)
    }

    @Test func tokenTrafficUsesTheEnvironmentsCAFileAndACertificateFailureIsTriedOnce() async throws {
        let ca = try await PrivateCA()
        let wire = try await WireServer(["idp:tls"], certificate: ca.leaf)
        let origin = wire.origin("idp", scheme: "https")
        func environment(_ name: String, caFile: String?) -> [String] {
            ["  \(name):", "    base_url: \(origin)/api", "    default_profile: svc"]
                + (caFile.map { ["    ca_file: \($0)"] } ?? []) + [
                    "    profiles:", "      svc:", "        type: client_credentials",
                    "        token_url: \(origin)/token", "        client_id: svc",
                    "        client_secret: { env: E2E_SECRET }",
                ]
        }
        let config =
            ["version: 1", "environments:"] + environment("untrusted", caFile: nil)
            + environment("trusted", caFile: ca.caFile)
        let client = try RelayClient(
            config: config.joined(separator: "\n") + "\n", environment: ["E2E_SECRET": Self.secret])
        let relay = client.relay

        let refused = try await relay.call("request", ["environment": "untrusted", "path": "/x"])
        #expect(refused["error"]?["data"]?["kind"] == "transport", "\(refused.jsonText)")
        #expect(try wire.accepts("idp") == 1, "a certificate failure must not be retried")

        let trusted = try await relay.call("request", ["environment": "trusted", "path": "/x"])
        #expect(trusted["result"]?["status"] == .int(200), "\(trusted.jsonText)")
        // Read after the trusted exchange: the listener logs a failed handshake when it reads the
        // client's alert, which can be after the relay has already answered the refused request.
        let handshakes = try wire.records("idp", "tls").sorted {
            ($0["conn"]?.intValue ?? 0) < ($1["conn"]?.intValue ?? 0)
        }
        #expect(handshakes.first?["ok"] == false, "the untrusted environment's handshake failed")
        #expect(handshakes.filter { $0["ok"] == false }.count == 1, "\(handshakes)")
        #expect(
            try wire.request(answeredBy: trusted)?.header("Authorization").first?.hasPrefix("Bearer tok-idp-") == true)
        let tokenRequests = try wire.requests("idp").filter { $0["target"] == "/token" }
        #expect(tokenRequests.count == 1, "the token came through the trusted environment's transport")
        _ = try await client.finish()
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.secret], relay)
    }

    @Test func aSubscriptionWhoseServerFailsTLSClosesWithKindTransportInsteadOfReconnecting() async throws {
        let ca = try await PrivateCA()
        let wire = try await WireServer(["sse:tls"], certificate: ca.leaf)
        let origin = wire.origin("sse", scheme: "https")
        let client = try RelayClient(
            config: """
                version: 1
                environments:
                  untrusted:
                    base_url: \(origin)
                  trusted:
                    base_url: \(origin)
                    ca_file: \(ca.caFile)
                """)
        let relay = client.relay
        let failing = try await relay.subscribe(["environment": "untrusted", "path": "/events"])
        let lines = try await relay.waitForLines(what: "closed \(failing)") { $0.closedState(of: failing) != nil }
        #expect(lines.closedState(of: failing)?["error"]?["kind"] == "transport")
        #expect(!lines.states(of: failing).contains { $0["state"] == "reconnecting" })
        #expect(try wire.accepts("sse") == 1)

        let working = try await relay.subscribe(["environment": "trusted", "path": "/events"])
        let events = try await relay.waitForLines(what: "an event of \(working)") { lines in
            lines.notifications(of: working).contains { $0["method"] == "event" }
        }
        #expect(events.notifications(of: working).first { $0["method"] == "event" }?["params"]?["data"] == "hello")
        _ = try await client.finish()
    }
}
