import Foundation
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// One authorization-server call (``AuthorizationServerCall``): the same unusable endpoint gives the same outcome at
/// every endpoint that sends through it — the token endpoint, device authorization, revocation and the GitHub Actions
/// token service of an assertion grant. Each endpoint answers every attempt alike; retries are instant.
@Suite struct AuthorizationServerCallTests {
    /// One unusable endpoint: how every attempt ends.
    struct Unusable: Sendable, CustomTestStringConvertible {
        let name: String
        let answer: Result<HTTPResponse, HTTPError>
        var testDescription: String { name }
    }

    static func page(_ status: Int) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html")
        return HTTPResponse(status: status, headers: headers, body: Array("<html>down</html>".utf8))
    }

    static let unusable: [Unusable] = [
        Unusable(name: "HTTP 500 with a page", answer: .success(page(500))),
        Unusable(name: "HTTP 503 with a page", answer: .success(page(503))),
        Unusable(name: "HTTP 404 with a page", answer: .success(page(404))),
        Unusable(name: "an OAuth error", answer: .success(oauthError("invalid_request"))),
        Unusable(name: "connection refused", answer: .failure(.transport("connection refused"))),
        Unusable(name: "a TLS failure", answer: .failure(.tls("certificate verify failed"))),
        Unusable(name: "no answer in time", answer: .failure(.timeout)),
        Unusable(name: "the transfer cancelled", answer: .failure(.cancelled)),
    ]

    /// How a call ended: the kind of its error, or that it was cancelled (never a kind).
    static func outcome(_ call: () async throws -> Void) async -> String {
        do {
            try await call()
            return "success"
        } catch let error as AuthError {
            return error.errorKind.rawValue
        } catch is CancellationError {
            return "CancellationError"
        } catch {
            return "\(type(of: error))"
        }
    }

    static func post(_ url: String) -> HTTPRequest {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        return HTTPRequest(method: "POST", url: url, headers: headers, body: Array("token=t".utf8))
    }

    @Test(arguments: unusable)
    func everyEndpointGivesTheTokenEndpointsOutcome(_ endpoint: Unusable) async {
        let transport = FakeTransport { _ in endpoint.answer }
        let clock = FakeClock(autoAdvance: true)
        let client = TokenEndpointClient(transport: transport, clock: clock, random: { 0.5 })
        let deadline = clock.now.addingTimeInterval(60)
        let tokenEndpoint = await Self.outcome {
            _ = try await client.send(deadline: deadline, beforeFirstSend: {}) { Self.post("https://as.example/token") }
        }
        let deviceAuthorization = await Self.outcome {
            _ = try await client.deviceAuthorization(Self.post("https://as.example/device"), deadline: deadline)
        }
        let revocation = await Self.outcome {
            try await client.revoke(Self.post("https://as.example/revoke"), deadline: deadline)
        }
        let githubActions = await Self.outcome {
            _ = try await client.fetchGitHubActionsToken(
                url: "https://actions.example/token", bearer: "request-token", deadline: deadline)
        }
        #expect(tokenEndpoint != "success")
        #expect(deviceAuthorization == tokenEndpoint, "device authorization")
        #expect(revocation == tokenEndpoint, "revocation")
        #expect(githubActions == tokenEndpoint, "GitHub Actions token service")
    }

    @Test func theTransientStatusesAre408And429And5xx() {
        let transient = (100...699).filter { AuthorizationServerCall.isTransient(status: $0) }
        #expect(transient == [408, 429] + Array(500...599))
    }
}
