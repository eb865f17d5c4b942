import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Credentials and environment headers go only to the environment's origin as libcurl parses it
/// (SPEC §5.3), through the real binary, for `request` and `subscribe`. The "other" origin is a
/// wire_server listener that records every connection: for input that is refused it must see no
/// connection at all; for a valid URL to another origin it sees the request, without any canary.
@Suite struct OriginEndToEndTests {
    static let bearer = "canary-origin-bearer-3b9e71"
    static let environmentHeader = "canary-origin-env-header-c40d"

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
                        default_profile: static
                        headers:
                          X-Env-Canary: \(environmentHeader)
                        profiles:
                          static:
                            type: bearer
                            token: { env: E2E_BEARER }
                    """, environment: ["E2E_BEARER": bearer], arguments: ["--log-level", "trace"])
        }

        var api: String { "127.0.0.1:\(wire.port("api"))" }
        var other: String { "127.0.0.1:\(wire.port("other"))" }

        /// URLs that two parsers can read differently, each refused with -32602 at `/url`.
        var refusedURLs: [String] {
            [
                // finding 1: a NUL ends the C string libcurl sees ("http://other:1"), after the '@'
                // a hand-written parser saw the environment's origin.
                "http://\(other)\u{0}@\(api)/x", "http://\(other)\u{0}/x", "http://\(api)/x\u{0}",
                "http://\(other)\t@\(api)/x", "http://\(other)\r\n@\(api)/x", "http://\(api)/\u{7F}",
                "http://\(api)\\@\(other)/x", "http://user:pw@\(other)/x", "http://\(api)@\(other)/x",
                "http://\(other)\\\(api)/x", "http://\(other) /x", " http://\(other)/x", "ftp://\(other)/x",
            ]
        }

        /// Valid URLs to the other origin, however they are spelled: no credential goes there.
        var otherOriginURLs: [String] {
            [
                "HTTP://\(other)/upper", "http://%31%32%37.0.0.1:\(wire.port("other"))/encoded-host",
                "http://\(other)/fragment#@\(api)", "http://0x7f.0.0.1:\(wire.port("other"))/hex-host",
                "http://\(other)/x?next=@\(api)",
            ]
        }

        func expectNothingSecretAt(_ listener: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let raw = try wire.rawText(listener)
            #expect(!raw.contains(bearer), "the bearer reached \(listener)", sourceLocation: sourceLocation)
            #expect(
                !raw.contains(environmentHeader), "the environment header reached \(listener)",
                sourceLocation: sourceLocation)
        }
    }

    static func expectInvalidParams(
        _ reply: JSONValue, at pointer: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(reply["error"]?["code"] == .int(-32602), "\(reply.jsonText)", sourceLocation: sourceLocation)
        let pointers = reply["error"]?["data"]?["diagnostics"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue }
        #expect(pointers?.contains(pointer) == true, "\(reply.jsonText)", sourceLocation: sourceLocation)
    }

    @Test func requestURLsThatParsersReadDifferentlyAreRefusedAndNothingIsSent() async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        for url in setup.refusedURLs {
            Self.expectInvalidParams(try await relay.call("request", ["url": .string(url)]), at: "/url")
        }
        for (params, pointer) in [
            (["path": "/x\u{0}y"], "/path"), (["path": "/{id}", "pathParams": ["id": "a\r\nb"]], "/pathParams/id"),
            (["path": "/x", "query": ["q": "a\u{0}b"]], "/query/q"),
            (["path": "/x", "headers": ["X-Mine": "a\u{0}b"]], "/headers/X-Mine"),
            (["path": "/x", "headers": ["X-Mine": "a\r\nX-Injected: 1"]], "/headers/X-Mine"),
        ] as [(JSONValue, String)] {
            Self.expectInvalidParams(try await relay.call("request", params), at: pointer)
        }
        #expect(try setup.wire.accepts("other") == 0, "the other origin received a connection")
        #expect(try setup.wire.accepts("api") == 0, "a refused request was sent")

        // The positive control: the environment's own origin gets both.
        let same = try await relay.call("request", ["url": .string("http://\(setup.api)/same")])
        #expect(same["result"]?["status"] == .int(200))
        let record = try #require(try setup.wire.requests("api").last)
        #expect(record.header("Authorization") == ["Bearer \(Self.bearer)"])
        #expect(record.header("X-Env-Canary") == [Self.environmentHeader])
        _ = try await setup.client.finish()
        // (Environment headers are configuration, not secrets: trace logs may show them.)
        RequestCredentialsEndToEndTests.expectNeverPrinted([Self.bearer], relay)
    }

    @Test func requestsToAnotherOriginHoweverSpelledCarryNoCredentialOrEnvironmentHeader() async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        for url in setup.otherOriginURLs {
            let reply = try await relay.call("request", ["url": .string(url)])
            #expect(reply["result"]?["json"]?["listener"] == "other", "\(url): \(reply.jsonText)")
        }
        #expect(try setup.wire.requests("other").count == setup.otherOriginURLs.count)
        try setup.expectNothingSecretAt("other")
        // The same origin spelled differently is the same origin: libcurl connects to it.
        let encoded = try await relay.call(
            "request", ["url": .string("http://127.0.0.%31:\(setup.wire.port("api"))/e")])
        #expect(try setup.wire.request(answeredBy: encoded)?.header("Authorization") == ["Bearer \(Self.bearer)"])
    }

    @Test func subscribeURLsThatParsersReadDifferentlyAreRefusedAndNothingIsSent() async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        for url in setup.refusedURLs {
            Self.expectInvalidParams(try await relay.call("subscribe", ["url": .string(url)]), at: "/url")
        }
        for (params, pointer) in [
            (["path": "/events", "lastEventId": "41\r\nX-Injected: 1"], "/lastEventId"),
            (["path": "/events", "lastEventId": "41\u{0}"], "/lastEventId"),
            (["path": "/events", "headers": ["X-Mine": "a\u{0}b"]], "/headers/X-Mine"),
            (["path": "/events", "query": ["q": "a\nb"]], "/query/q"),
        ] as [(JSONValue, String)] {
            Self.expectInvalidParams(try await relay.call("subscribe", params), at: pointer)
        }
        #expect(try setup.wire.accepts("other") == 0, "the other origin received a connection")
        #expect(try setup.wire.accepts("api") == 0, "a refused subscription connected")
    }

    @Test func subscriptionsToAnotherOriginCarryNoCredentialOrEnvironmentHeader() async throws {
        let setup = try await Setup()
        let relay = setup.client.relay
        for (url, listener) in [
            ("HTTP://\(setup.other)/events", "other"),
            ("http://%31%32%37.0.0.1:\(setup.wire.port("other"))/events", "other"),
            ("http://\(setup.api)/events", "api"),
        ] {
            let sub = try await relay.subscribe(["url": .string(url)])
            _ = try await relay.waitForLines(what: "an event of \(sub)") { lines in
                lines.notifications(of: sub).contains { $0["method"] == "event" }
            }
            #expect(try await relay.call("unsubscribe", ["subscription": .string(sub)])["result"] != nil)
            #expect(try setup.wire.requests(listener).last?["target"] == "/events")
        }
        try setup.expectNothingSecretAt("other")
        let own = try #require(try setup.wire.requests("api").last)
        #expect(own.header("Authorization") == ["Bearer \(Self.bearer)"], "the positive control")
        #expect(own.header("X-Env-Canary") == [Self.environmentHeader])
    }
}
