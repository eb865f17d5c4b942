import Foundation
import Testing
import TokenRelayAuth
import TokenRelayErrorKinds
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// The credential-helper renderings (one place for `token-get` and `tokenrelay token`), the
/// ExecCredential version choice, and the git credential protocol: parsing, matching, answering.
struct CredentialHelperFormatTests {
    static let expiry = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15T08:00:00Z
    static let token = Token(
        accessToken: "at-canary-5c1e", receivedAt: expiry.addingTimeInterval(-3600), expiresAt: expiry, version: 1)
    static let noExpiry = Token(accessToken: "at-canary-5c1e", receivedAt: expiry, expiresAt: nil, version: 2)

    @Test func everyFormatRendersTheSpecifiedShape() throws {
        #expect(TokenFormat.raw.text(Self.token, version: .v1) == "at-canary-5c1e\n")
        #expect(TokenFormat.header.text(Self.token, version: .v1) == "Authorization: Bearer at-canary-5c1e\n")
        #expect(
            TokenFormat.json.value(Self.token, version: .v1)
                == ["access_token": "at-canary-5c1e", "token_type": "Bearer", "expires_at": "2027-01-15T08:00:00Z"])
        #expect(
            TokenFormat.execCredential.value(Self.token, version: .v1beta1)
                == [
                    "apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                    "status": ["token": "at-canary-5c1e", "expirationTimestamp": "2027-01-15T08:00:00Z"],
                ])
        let printed = try JSONParser.parse(TokenFormat.execCredential.text(Self.token, version: .v1))
        #expect(printed["apiVersion"] == "client.authentication.k8s.io/v1")
    }

    @Test func aTokenOfUnknownExpiryHasNoExpiryFields() {
        #expect(TokenFormat.json.value(Self.noExpiry, version: .v1)["expires_at"] == nil)
        #expect(TokenFormat.execCredential.value(Self.noExpiry, version: .v1)["status"]?["expirationTimestamp"] == nil)
    }

    @Test func execInfoPicksTheVersionAndV1IsTheDefault() throws {
        #expect(try ExecCredentialVersion.fromExecInfo(nil) == .v1)
        #expect(try ExecCredentialVersion.fromExecInfo("") == .v1)
        let beta =
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":true}}"#
        #expect(try ExecCredentialVersion.fromExecInfo(beta) == .v1beta1)
        #expect(
            try ExecCredentialVersion.fromExecInfo(
                #"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#)
                == .v1)
    }

    @Test(arguments: [
        #"{"apiVersion":"client.authentication.k8s.io/v1alpha1","kind":"ExecCredential"}"#, "not json", "[]",
        #"{"kind":"ExecCredential"}"#,
    ])
    func unknownOrMalformedExecInfoIsAClearError(_ info: String) {
        #expect {
            _ = try ExecCredentialVersion.fromExecInfo(info)
        } throws: { error in
            guard let error = error as? RPCError else { return false }
            return error.kind == .invalidParams && error.message.contains("KUBERNETES_EXEC_INFO")
        }
    }

    // MARK: - git

    @Test func gitRequestsParseToTheBlankLineWithRepeatsAndCRLF() throws {
        let request = try GitCredentialRequest.parse(
            Array(
                "protocol=https\r\nhost=git.example:8443\nwwwauth[]=Basic realm=\"x\"\nwwwauth[]=Bearer\npath=org/repo.git\n\nhost=after\n"
                    .utf8))
        #expect(request["protocol"] == "https")
        #expect(request["host"] == "git.example:8443")
        #expect(request["path"] == "org/repo.git")
        #expect(request.attributes.filter { $0.key == "wwwauth[]" }.map(\.value) == ["Basic realm=\"x\"", "Bearer"])
        #expect(try GitCredentialRequest.parse(Array("host=a=b\n".utf8))["host"] == "a=b")
        #expect(try GitCredentialRequest.parse([]).attributes.isEmpty)
    }

    @Test func badGitInputIsRefused() {
        #expect(throws: RPCError.self) { try GitCredentialRequest.parse(Array("protocol https\n".utf8)) }
        #expect(throws: RPCError.self) {
            try GitCredentialRequest.parse([UInt8](repeating: 0x61, count: GitCredentialRequest.maximumBytes + 1))
        }
    }

    static func request(_ text: String) throws -> GitCredentialRequest {
        try GitCredentialRequest.parse(Array(text.utf8))
    }

    @Test(arguments: [
        ("protocol=https\nhost=git.example\n", "https://git.example", GitCredentialMatch.matches(specificity: 0)),
        ("protocol=https\nhost=GIT.Example\n", "https://git.example/", .matches(specificity: 0)),
        ("protocol=https\nhost=git.example:443\n", "https://git.example", .matches(specificity: 0)),
        ("protocol=https\nhost=git.example\n", "https://git.example:443/", .matches(specificity: 0)),
        ("protocol=http\nhost=127.0.0.1:8080\n", "http://127.0.0.1:8080", .matches(specificity: 0)),
        ("protocol=http\nhost=127.0.0.1:8081\n", "http://127.0.0.1:8080", .none),
        ("protocol=http\nhost=git.example\n", "https://git.example", .none),
        ("protocol=https\nhost=evil.example\n", "https://git.example", .none),
        ("protocol=https\nhost=git.example.evil\n", "https://git.example", .none),
        ("protocol=https\nhost=evil@git.example\n", "https://git.example", .none),
        ("protocol=ssh\nhost=git.example\n", "https://git.example", .none),
        ("host=git.example\n", "https://git.example", .none),
        ("protocol=https\nhost=git.example\npath=org/repo.git\n", "https://git.example/org", .matches(specificity: 4)),
        ("protocol=https\nhost=git.example\npath=org\n", "https://git.example/org/", .matches(specificity: 4)),
        ("protocol=https\nhost=git.example\npath=organisation/repo.git\n", "https://git.example/org", .none),
        ("protocol=https\nhost=git.example\npath=other/repo.git\n", "https://git.example/org", .none),
        ("protocol=https\nhost=git.example\n", "https://git.example/org", .pathRequired),
        ("protocol=https\nhost=git.example\npath=org?x\n", "https://git.example/org", .none),
        ("protocol=https\nhost=git.example\npath=org#x\n", "https://git.example/org", .none),
        ("protocol=https\nhost=[::1]:8443\n", "https://[::1]:8443/", .matches(specificity: 0)),
        ("protocol=https\nhost=git.example\n", "not a url", .none),
    ])
    func gitRequestsMatchOnlyTheirBaseURLsOriginAndPath(
        _ text: String, _ baseURL: String, _ expected: GitCredentialMatch
    )
        throws
    {
        #expect(GitCredentialMatch.match(try Self.request(text), baseURL: baseURL) == expected)
    }

    @Test func theGetAnswerCarriesUsernamePasswordAndExpiryInUnixSeconds() {
        #expect(
            GitCredentialMatch.answer(username: "x-access-token", password: "at-canary-5c1e", expiresAt: Self.expiry)
                == "username=x-access-token\npassword=at-canary-5c1e\npassword_expiry_utc=1800000000\n")
        #expect(
            GitCredentialMatch.answer(username: "bot", password: "p", expiresAt: nil) == "username=bot\npassword=p\n")
        #expect(GitCredentialMatch.answer(username: "bot\npassword=evil", password: "p", expiresAt: nil) == nil)
        #expect(GitCredentialMatch.answer(username: "bot", password: "p\r", expiresAt: nil) == nil)
    }
}
