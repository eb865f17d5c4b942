import Foundation
import Testing
import TokenRelayHTTP
import TokenRelayLogging

@testable import TokenRelayAuth

/// Server text is cleaned where it is read (SPEC §5.3): the OAuth error object's texts, the
/// discovery document's member names and auth-method list.
@Suite struct AuthServerTextTests {
    static let secret = "server-text-canary-\(UUID().uuidString)"

    init() { Redactor.shared.register(Self.secret) }

    @Test func oauthErrorTextsAreRedactedAndBoundedByTheParser() throws {
        let long = String(repeating: "\(Self.secret)\\u0301 ", count: 40)
        let body = #"{"error":"invalid_client \#(Self.secret)\n","error_description":"\#(long)"}"#
        let error = try #require(TokenResponseParser.parseError(Array(body.utf8), status: 400))
        let code = try #require(error.oauthError)
        let description = try #require(error.oauthErrorDescription)
        #expect(code == "invalid_client [REDACTED] ")
        #expect(description.hasPrefix("[REDACTED]\u{0301} [REDACTED]\u{0301} "))
        #expect(description.utf8.count <= ServerText.maximumBytes)
        for text in [code, description, error.description] {
            #expect(!Array(text.utf8).containsBytes(Array(Self.secret.utf8)), "\(text)")
        }
    }

    @Test func discoveryMemberNamesAreRedactedInErrors() {
        let body =
            #"{"issuer":"https://i.example","token_endpoint":"https://i.example/t","\#(Self.secret)_endpoint":7}"#
        do {
            _ = try AuthorizationServerMetadata.parse(Array(body.utf8), expectedIssuer: "https://i.example")
            Issue.record("expected a discovery error")
        } catch {
            #expect(error.description.contains("[REDACTED]_endpoint is not a string"), "\(error)")
            #expect(!error.description.contains(Self.secret))
        }
    }
}

extension Array where Element == UInt8 {
    func containsBytes(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
