import FoundationEssentials
import Testing
import TokenRelayHTTP

@testable import TokenRelayServer

/// What `tokenrelay exec`'s endpoint checks of a request (the placeholder, the Host) and which of
/// its fields go on.
@Suite struct ExecGateTests {
    static let placeholder = "ph-3Jx9_Qe"
    static let gate = ExecGate(placeholder: placeholder, hosts: ["127.0.0.1:4000", "localhost:4000"])

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    @Test(arguments: [
        ("Authorization", "Bearer \(placeholder)", true),
        ("Authorization", "bearer   \(placeholder)", true),
        ("Authorization", "token \(placeholder)", true),
        ("Authorization", basic("x-access-token", placeholder), true),
        ("Authorization", basic("", placeholder), true),
        ("X-API-Key", placeholder, true),
        ("Authorization", "Bearer \(placeholder)x", false),
        ("Authorization", "Bearer ph", false),
        ("Authorization", basic(placeholder, "pw"), false),
        ("Authorization", "Digest \(placeholder)", false),
        ("Authorization", placeholder, false),
        ("X-Other", placeholder, false),
        ("Cookie", "s=\(placeholder)", false),
    ])
    func thePlaceholderIsFoundWhereAClientPutsIt(name: String, value: String, expected: Bool) {
        let headers = HTTPHeaders([(name, value)])
        #expect(Self.gate.presentsPlaceholder(headers, credentialHeader: "X-API-Key") == expected, "\(name): \(value)")
    }

    @Test func aHostOtherThanTheEndpointsIsRefused() {
        #expect(Self.gate.hostAllowed(HTTPHeaders([("Host", "127.0.0.1:4000")])))
        #expect(Self.gate.hostAllowed(HTTPHeaders([("Host", "LOCALHOST:4000")])))
        #expect(!Self.gate.hostAllowed(HTTPHeaders([("Host", "rebound.example:4000")])))
        #expect(!Self.gate.hostAllowed(HTTPHeaders([("Host", "127.0.0.1:4001")])))
        #expect(!Self.gate.hostAllowed(HTTPHeaders()))
        #expect(ExecGate(placeholder: "p", hosts: nil).hostAllowed(HTTPHeaders([("Host", "docker")])))
    }

    @Test func credentialsHopByHopAndNamedFieldsAreNotForwarded() {
        let headers = HTTPHeaders([
            ("Host", "127.0.0.1:4000"), ("Authorization", "Bearer x"), ("Cookie", "a=b"), ("X-API-Key", "k"),
            ("Connection", "keep-alive, X-Private"), ("X-Private", "1"), ("Keep-Alive", "5"), ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"), ("Content-Length", "4"), ("Expect", "100-continue"),
            ("Proxy-Authorization", "p"), ("DPoP", "proof"), ("Upgrade", "h2c"),
            ("Accept", "application/json"), ("Content-Type", "text/plain"), ("X-Request-ID", "r1"),
        ])
        let forwarded = ExecGate.forwardedFields(headers, credentialHeader: "X-API-Key")
        #expect(forwarded.fields.map(\.name) == ["Accept", "Content-Type", "X-Request-ID"])
    }

    @Test func theResponsesFramingFieldsAreTheEndpointsOwn() {
        let headers = HTTPHeaders([
            ("Content-Type", "text/plain"), ("Content-Length", "3"), ("Transfer-Encoding", "chunked"),
            ("Connection", "close"), ("Set-Cookie", "a=b"),
        ])
        #expect(ExecGate.returnedFields(headers).fields.map(\.name) == ["Content-Type", "Set-Cookie"])
    }
}
