import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// Text a hostile token endpoint controls (SPEC §5.3): the endpoint of
/// `Fixtures/echoing_token_server.py` echoes the client secret in `error`, `error_description`,
/// `error_uri` and a challenge. Through `request`, `subscribe` and `auth-failed`, at trace level,
/// the secret never reaches stdout or stderr, and the copied texts are bounded.
@Suite struct ServerTextEndToEndTests {
    static let secret = "canary-client-secret-5e7b21"

    final class EchoingTokenServer: Sendable {
        let fixture: FixtureServer
        let port: Int

        init() async throws {
            fixture = try await FixtureServer(
                script: RecordingServer.fixtures.appendingPathComponent("echoing_token_server.py").path, words: 1)
            port = fixture.ports[0]
        }

        var origin: String { "http://127.0.0.1:\(port)" }
    }

    static func config(_ server: EchoingTokenServer) -> String {
        func profile(_ name: String, client: String, auth: String) -> String {
            """
                  \(name):
                    type: client_credentials
                    token_url: \(server.origin)/token
                    client_id: \(client)
                    client_secret: { env: E2E_CLIENT_SECRET }
                    client_auth: \(auth)
            """
        }
        return """
            version: 1
            default_environment: local
            environments:
              local:
                base_url: \(server.origin)/api
                default_profile: refused
                profiles:
            \(profile("refused", client: "refused", auth: "client_secret_post"))
            \(profile("basic", client: "basic", auth: "client_secret_basic"))
            \(profile("renews", client: "renews", auth: "client_secret_post"))
            """
    }

    /// The server texts copied into one error's `data` or notification's `params`: present and bounded.
    static func expectCleaned(_ object: JSONValue?, sourceLocation: SourceLocation = #_sourceLocation) {
        let code = object?["oauthError"]?.stringValue
        let description = object?["oauthErrorDescription"]?.stringValue
        #expect(code == "invalid_client [REDACTED]", "\(object?.jsonText ?? "nil")", sourceLocation: sourceLocation)
        #expect(
            description?.hasPrefix("the secret [REDACTED]\u{0301} is wrong; ") == true, sourceLocation: sourceLocation)
        #expect((description?.utf8.count ?? 0) <= 256, sourceLocation: sourceLocation)
    }

    @Test func anEchoedClientSecretNeverLeavesThroughRequestSubscribeOrAuthFailed() async throws {
        let server = try await EchoingTokenServer()
        let path = try TemporaryDirectory.file(Self.config(server))
        let relay = try RelayProcess(
            ["serve", "--config", path, "--log-level", "trace"], environment: ["E2E_CLIENT_SECRET": Self.secret])

        // request: the first acquisition is refused (form-posted secret, HTTP 400).
        let refused = try await relay.call("request", ["method": "GET", "path": "/data", "profile": "refused"])
        #expect(refused["error"]?["data"]?["kind"] == "auth", "\(refused.jsonText)")
        Self.expectCleaned(refused["error"]?["data"])

        // request with a Basic client: HTTP 401 with the secret in WWW-Authenticate as well.
        let basic = try await relay.call("request", ["method": "GET", "path": "/data", "profile": "basic"])
        Self.expectCleaned(basic["error"]?["data"])

        // auth-failed: the first token works; the renewal after token-invalidate is refused.
        let first = try await relay.call("request", ["method": "GET", "path": "/data", "profile": "renews"])
        #expect(first["result"]?["status"]?.intValue == 200, "\(first.jsonText)")
        _ = try await relay.call("token-invalidate", ["profile": "renews"])
        let renewal = try await relay.call("request", ["method": "GET", "path": "/data", "profile": "renews"])
        Self.expectCleaned(renewal["error"]?["data"])
        let failed = try await relay.firstLine(timeout: .seconds(60), what: "auth-failed") {
            $0["method"] == "auth-failed"
        }
        #expect(failed["params"]?["profile"] == "renews")
        Self.expectCleaned(failed["params"])

        // subscribe: the credential is refused before any connection; the subscription closes
        // with kind auth and a message that went through the same cleaning.
        let subscribed = try await relay.call("subscribe", ["path": "/events", "profile": "refused"])
        let id = try #require(subscribed["result"]?["subscription"]?.stringValue, "\(subscribed.jsonText)")
        let closed = try await relay.firstLine(timeout: .seconds(60), what: "closed subscription") {
            $0["method"] == "subscription-state" && $0["params"]?["subscription"]?.stringValue == id
                && $0["params"]?["state"] == "closed"
        }
        #expect(closed["params"]?["error"]?["kind"] == "auth", "\(closed.jsonText)")
        #expect(closed["params"]?["error"]?["message"]?.stringValue?.contains("[REDACTED]") == true)

        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        #expect(relay.stderrText.contains("[REDACTED]"), "the trace log shows the masked challenge")
        // Byte search: the secret is followed by a combining mark, which hides it from
        // String.contains (Character comparison).
        for secret in [Self.secret, String(Self.secret.dropLast(4))] {
            #expect(!Self.bytes(relay.stdoutText, contain: secret), "on stdout")
            #expect(!Self.bytes(relay.stderrText, contain: secret), "on stderr")
        }
    }

    static func bytes(_ text: String, contain needle: String) -> Bool {
        let haystack = Array(text.utf8)
        let needle = Array(needle.utf8)
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }
}
