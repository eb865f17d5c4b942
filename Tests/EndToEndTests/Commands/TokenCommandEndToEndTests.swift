import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay token` where no token server is needed: the refusals and their exit codes, and
/// the git dialect staying silent for what it must not answer. (`interaction_required` and its
/// exit code 9 are tested against the real authorization server in CredentialHelperInteropTests.)
@Suite struct TokenCommandEndToEndTests {
    static let config = """
        version: 1
        default_environment: forge
        environments:
          forge:
            base_url: https://git.example.test/org
            default_profile: svc
            profiles:
              svc:
                type: client_credentials
                token_url: http://127.0.0.1:1/token
                client_id: svc
                client_secret: { env: TOKEN_E2E_SECRET }
                expose_token: true
              hidden:
                type: client_credentials
                token_url: http://127.0.0.1:1/token
                client_id: svc
                client_secret: { env: TOKEN_E2E_SECRET }
        """
    static let secret = "token-e2e-secret-canary-41d7"
    static let fetched = "fetched-bearer-canary-77c2"
    static var fetchedProfile: String {
        let script = RecordingServer.fixtures.appendingPathComponent("token_command.py").path
        let count = TestScratch.path("token-e2e")
        return """
              bearer:
                base_url: https://bearer.example.test
                default_profile: fetched
                profiles:
                  fetched:
                    type: bearer
                    token: { command: [/usr/bin/python3, \(script), \(count), \(fetched)] }
                    expose_token: true
                    git_username: bot
            """
    }

    static func run(_ arguments: [String], stdin: String = "", environment: [String: String] = [:]) async throws
        -> (code: Int32, stdout: String, stderr: String)
    {
        let path = try TemporaryDirectory.file(config + "\n" + fetchedProfile)
        let process = try RelayProcess(
            ["token", "--config", path] + arguments,
            environment: environment.merging(["TOKEN_E2E_SECRET": secret]) { $1 }, testMethods: false)
        if !stdin.isEmpty { try process.write(stdin) }
        try process.closeStdin()
        let code = try await process.exitCode()
        #expect(!process.stderrText.contains(secret))
        return (code, process.stdoutText, process.stderrText)
    }

    @Test func aBearerProfilesFetchedTokenIsPrintedInEveryFormatWithoutAnExpiry() async throws {
        let raw = try await Self.run(["--env", "bearer"])
        #expect(raw.code == 0)
        #expect(raw.stdout == Self.fetched + "\n")
        let json = try JSONParser.parse(try await Self.run(["--env", "bearer", "--format", "json"]).stdout)
        #expect(json == ["access_token": .string(Self.fetched), "token_type": "Bearer"])
        let exec = try JSONParser.parse(try await Self.run(["--env", "bearer", "--format", "exec-credential"]).stdout)
        #expect(exec["status"] == ["token": .string(Self.fetched)])
        let git = try await Self.run(["--format", "git", "get"], stdin: "protocol=https\nhost=bearer.example.test\n\n")
        #expect(git.code == 0)
        #expect(git.stdout == "username=bot\npassword=\(Self.fetched)\n")
        #expect(!git.stderr.contains(Self.fetched))
    }

    @Test func tokenGetRefusesBadFormatParamsWithPointersAndKeepsServing() async throws {
        let client = try RelayClient(
            config: Self.config + "\n" + Self.fetchedProfile, environment: ["TOKEN_E2E_SECRET": Self.secret])
        let cases: [(params: String, pointer: String)] = [
            (#"{"format":"raw"}"#, "/format"), (#"{"format":"git"}"#, "/format"),
            (#"{"apiVersion":"client.authentication.k8s.io/v1"}"#, "/apiVersion"),
            (#"{"format":"exec-credential","apiVersion":"client.authentication.k8s.io/v1alpha1"}"#, "/apiVersion"),
            (#"{"minValid":-1}"#, "/minValid"), (#"{"minValid":"60s"}"#, "/minValid"),
        ]
        for (params, pointer) in cases {
            let reply = try await client.call("token-get", params)
            #expect(reply["error"]?["data"]?["kind"] == "invalid_params", "\(params)")
            #expect(
                reply["error"]?["data"]?["diagnostics"]?.arrayValue?.first?["pointer"]?.stringValue == pointer,
                "\(params)")
        }
        let header = try await client.call("token-get", #"{"environment":"bearer","format":"header"}"#)
        #expect(header["result"] == .string("Authorization: Bearer \(Self.fetched)"))
        #expect(try await client.finish() == 0)
        #expect(!client.relay.stderrText.contains(Self.fetched))
    }

    @Test func aProfileThatDoesNotExposeItsTokenIsRefusedWithExitThree() async throws {
        let result = try await Self.run(["--profile", "hidden"])
        #expect(result.code == 3)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("expose_token"))
    }

    @Test func anUnknownExecCredentialVersionIsAUsageErrorBeforeAnyTokenRequest() async throws {
        let result = try await Self.run(
            ["--format", "exec-credential"],
            environment: [
                "KUBERNETES_EXEC_INFO": #"{"apiVersion":"client.authentication.k8s.io/v2","kind":"ExecCredential"}"#
            ])
        #expect(result.code == 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("client.authentication.k8s.io/v2"))
        #expect(result.stderr.contains("client.authentication.k8s.io/v1beta1"))
    }

    @Test(arguments: [["--format", "xml"], ["--min-valid", "soon"], ["--format", "git"], ["extra"]])
    func badArgumentsAreUsageErrors(_ arguments: [String]) async throws {
        let result = try await Self.run(arguments)
        #expect(result.code == 2)
        #expect(result.stdout.isEmpty)
    }

    @Test(arguments: [
        // Another host, the default environment's host without the path git must send, another scheme.
        "protocol=https\nhost=evil.example.test\n\n",
        "protocol=https\nhost=git.example.test\n\n",
        "protocol=https\nhost=git.example.test\npath=other/repo.git\n\n",
        "protocol=http\nhost=git.example.test\npath=org/repo.git\n\n",
    ])
    func theGitHelperAnswersNothingForWhatNoBaseURLMatches(_ input: String) async throws {
        let result = try await Self.run(["--format", "git", "get"], stdin: input)
        #expect(result.code == 0)
        #expect(result.stdout.isEmpty)
    }

    @Test func theGitHelperIgnoresStoreAndUnknownActionsAndRefusesMalformedInput() async throws {
        let store = try await Self.run(
            ["--format", "git", "store"],
            stdin: "protocol=https\nhost=git.example.test\npath=org/r.git\nusername=x\npassword=p\n\n")
        #expect(store.code == 0 && store.stdout.isEmpty)
        let unknown = try await Self.run(["--format", "git", "capability"], stdin: "\n")
        #expect(unknown.code == 0 && unknown.stdout.isEmpty)
        let erase = try await Self.run(
            ["--format", "git", "erase"], stdin: "protocol=https\nhost=git.example.test\npath=org/r.git\npassword=p\n\n"
        )
        #expect(erase.code == 0 && erase.stdout.isEmpty)
        let malformed = try await Self.run(["--format", "git", "get"], stdin: "protocol https\n\n")
        #expect(malformed.code == 2)
        #expect(malformed.stdout.isEmpty)
    }
}
