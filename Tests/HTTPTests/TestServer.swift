import Foundation
import TestSupport
import TokenRelayHTTP

/// The shared fixture server in its `transport` role (`TestSupport/Fixtures/fixture_server.py`),
/// one per test, stopped with SIGKILL.
final class TestServer: Sendable {
    let fixture: FixtureServer
    /// Port of the main routes.
    let port: Int
    /// Port of the redirect target that records hits.
    let otherPort: Int
    /// A loopback port with no listener.
    let closedPort: Int
    /// The main routes over TLS, certificate `certificatePath` (self-signed for 127.0.0.1).
    let tlsPort: Int
    /// Path of the TLS server's certificate, to trust as a CA file.
    static let certificatePath = FixtureServer.certificatePath

    init() async throws {
        fixture = try await FixtureServer(role: "transport", ports: 4)
        (port, otherPort, closedPort, tlsPort) = (
            fixture.ports[0], fixture.ports[1], fixture.ports[2], fixture.ports[3]
        )
    }

    /// Kills the server.
    func stop() { fixture.stop() }

    /// An absolute URL on the main port.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}

/// The decoded `/echo` reply.
struct Echo: Decodable {
    let method: String
    let path: String
    let headers: [[String]]
    let body: String

    var bodyBytes: [UInt8] { Data(base64Encoded: body).map { Array($0) } ?? [] }

    func values(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }

    init(_ response: HTTPResponse) throws {
        self = try JSONDecoder().decode(Echo.self, from: Data(response.body))
    }
}
