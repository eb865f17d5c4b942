import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Caller headers cannot frame the message (SPEC §5.3): against a keep-alive server that frames
/// requests by the client's Content-Length and records them raw, one caller's body can never
/// become a second request carrying the next caller's credentials, and each caller gets the
/// answer to its own request.
@Suite struct SmugglingEndToEndTests {
    static let alice = "canary-smuggle-alice-77d1"
    static let bob = "canary-smuggle-bob-0e5a"

    /// A complete request inside a body, left open so the next request on the connection would
    /// become its `X-Swallow` header (and its headers, Bob's Authorization, this one's).
    static let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Swallow: "

    static func client(_ wire: WireServer) throws -> RelayClient {
        try RelayClient(
            config: """
                version: 1
                environments:
                  local:
                    base_url: \(wire.origin("api"))
                    profiles:
                      alice:
                        type: bearer
                        token: { env: E2E_ALICE }
                      bob:
                        type: bearer
                        token: { env: E2E_BOB }
                """, environment: ["E2E_ALICE": alice, "E2E_BOB": bob])
    }

    @Test(arguments: [
        ("Content-Length", "0"), ("Transfer-Encoding", "chunked"), ("Host", "127.0.0.1"), ("Connection", "keep-alive"),
        ("Keep-Alive", "timeout=5"), ("Upgrade", "h2c"), ("TE", "trailers"), ("Trailer", "X-Late"),
        ("Proxy-Authorization", "Basic eDp5"), ("proxy-connection", "keep-alive"), (":path", "/smuggled"),
    ])
    func framingHeadersAreRefusedSoTheNextCallerGetsItsOwnAnswer(name: String, value: String) async throws {
        let wire = try await WireServer(["api"])
        let client = try Self.client(wire)
        let relay = client.relay
        // Alice opens the keep-alive connection Bob's request will reuse.
        let warm = try await relay.call("request", ["profile": "alice", "path": "/warm"])
        #expect(warm["result"]?["json"]?["target"] == "/warm")

        let attempt = try await relay.call(
            "request",
            [
                "profile": "alice", "method": "POST", "path": "/a", "headers": [.init(name): .string(value)],
                "text": .string(Self.smuggled),
            ])
        OriginEndToEndTests.expectInvalidParams(attempt, at: ParamDiagnostic.pointer(["headers", name]))
        let subscribe = try await relay.call(
            "subscribe", ["profile": "alice", "path": "/events", "headers": [.init(name): .string(value)]])
        OriginEndToEndTests.expectInvalidParams(subscribe, at: ParamDiagnostic.pointer(["headers", name]))

        let own = try await relay.call("request", ["profile": "bob", "path": "/b"])
        #expect(own["result"]?["json"]?["target"] == "/b", "Bob got someone else's answer: \(own.jsonText)")
        #expect(try wire.request(answeredBy: own)?.header("Authorization") == ["Bearer \(Self.bob)"])
        #expect(try wire.request(answeredBy: warm)?.header("Authorization") == ["Bearer \(Self.alice)"])

        let requests = try wire.requests("api")
        #expect(requests.map { $0["target"]?.stringValue ?? "?" } == ["/warm", "/b"], "what the server parsed")
        #expect(!(try wire.rawText("api").contains("/smuggled")), "the smuggled request reached the server")
        #expect(try wire.accepts("api") == 1, "Bob's request reused Alice's connection")
        _ = try await client.finish()
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.alice, Self.bob], relay)
    }
}
