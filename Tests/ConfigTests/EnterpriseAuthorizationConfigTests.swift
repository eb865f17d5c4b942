import Testing

@testable import TokenRelayConfig

/// Enterprise-managed authorization (SPEC §9.9): a jwt_bearer profile whose assertion is another
/// profile's token (`assertion: { profile }`), that profile a token exchange of a person's ID
/// token (`subject: { profile, token: id_token }`).
@Suite struct EnterpriseAuthorizationConfigTests {
    static let person = """
              person:
                type: authorization_code
                issuer: https://idp.example.com
                client_id: editor
                scopes: [openid, email]

        """
    static let idp = """
              idp:
                type: token_exchange
                token_url: https://idp.example.com/token
                client_id: editor
                subject: { profile: person, token: id_token }
                requested_token_type: id-jag

        """
    static let mcp = """
              mcp:
                type: jwt_bearer
                discover: true
                client_id: app
                client_secret: { env: S }
                assertion: { profile: idp }

        """

    func config(_ profiles: String) -> String {
        """
        version: 1
        environments:
          e:
            base_url: https://mcp.example.com/mcp
            profiles:
        \(profiles)
        """
    }

    func decode(_ profiles: String) async -> ConfigLoadResult {
        await decodeConfig(config(profiles), environment: ["HOME": "/home/u", "S": "secret-value"])
    }

    @Test func theChainDecodes() async throws {
        let result = await decode(Self.person + Self.idp + Self.mcp)
        let profiles = try #require(result.settings?.environments.first?.profiles, "\(result.diagnostics)")
        guard case .tokenExchange(_, let exchange)? = profiles.first(where: { $0.name == "idp" })?.kind,
            case .jwtBearer(let client, let assertion)? = profiles.first(where: { $0.name == "mcp" })?.kind
        else {
            Issue.record("\(result.diagnostics.map(\.rendered))")
            return
        }
        guard case .profile("person", idToken: true) = exchange.subject else {
            Issue.record("subject \(exchange.subject)")
            return
        }
        #expect(exchange.subjectTokenType == "urn:ietf:params:oauth:token-type:id_token")
        #expect(exchange.requestedTokenType == "urn:ietf:params:oauth:token-type:id-jag")
        #expect(client.discovery != nil)
        guard case .profile("idp") = assertion else {
            Issue.record("assertion \(assertion)")
            return
        }
    }

    @Test(arguments: [
        // A cycle through an assertion: mcp takes idp's token, idp exchanges mcp's.
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n        assertion: { profile: idp }\n"
                + "      idp:\n        type: token_exchange\n        token_url: https://idp/t\n        client_id: a\n"
                + "        subject: { profile: mcp }\n",
            "cycle of profiles that use each other's tokens"
        ),
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n        assertion: { profile: nope }\n",
            "from profile 'nope', which environment 'e' does not have"
        ),
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n        assertion: { profile: mcp }\n",
            "cannot take its own token as its"
        ),
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n        assertion: { profile: k }\n"
                + "      k:\n        type: bearer\n        token: { env: S }\n",
            "a bearer profile"
        ),
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n"
                + "        assertion: { profile: idp, audience: x }\n" + idp,
            "audience"
        ),
        // An ID token only exists for a person's OpenID Connect login.
        (
            "      svc:\n        type: client_credentials\n        token_url: https://idp/t\n        client_id: a\n"
                + idp.replacing("profile: person", with: "profile: svc"),
            "exchanges the ID token of 'svc', which has none"
        ),
        (
            person.replacing("[openid, email]", with: "[email]") + idp,
            "exchanges the ID token of 'person', which has none"
        ),
        (person + idp.replacing("token: id_token", with: "token: refresh_token"), "must be one of"),
        (
            "      mcp:\n        type: jwt_bearer\n        token_url: https://as/t\n        step_up: true\n"
                + "        assertion: { env: S }\n",
            "step_up"
        ),
    ])
    // The expected texts avoid the word "assertion": other tests register it as a secret with the
    // process-wide redactor.
    func misusesAreDiagnosed(_ profiles: String, _ expected: String) async {
        let result = await decode(profiles)
        #expect(result.settings == nil)
        #expect(result.errors.contains { $0.message.contains(expected) }, "\(result.diagnostics.map(\.rendered))")
    }
}
