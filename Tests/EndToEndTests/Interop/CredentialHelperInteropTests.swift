import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// Credential-helper mode with the real tools: `kubectl` (v1.32) running `tokenrelay token
/// --format exec-credential` from a kubeconfig `exec:` entry, and `git` (2.39) running `tokenrelay
/// token --format git` as its credential helper, each against a loopback server that lets in
/// only a token the real authorization server (Django OAuth Toolkit) issued and still holds
/// active. Also `token-get`'s formats and `minValid` through a served relay.
@Suite(.serialized) struct CredentialHelperInteropTests {
    static let secret = "svc-secret"

    /// The environment the tools run in: nothing of the user's (HOME, git and kube config).
    static func toolEnvironment(home: URL) -> [String: String] {
        [
            "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home.path, "SVC_SECRET": secret,
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "KUBECACHEDIR": home.appendingPathComponent("kube").path,
        ]
    }

    /// A config with environment `target` at `baseURL` (profile `svc`, exposed, client
    /// credentials at the stack's AS) and a default environment `other` on another origin.
    static func config(_ stack: InteropStack, baseURL: String, extra: [String] = []) throws -> String {
        let profile =
            stack.clientCredentials(client: "svc", secretVariable: "SVC_SECRET") + ["expose_token: true"] + extra
        let lines = profile.map { "          \($0)" }.joined(separator: "\n")
        return try TemporaryDirectory.file(
            """
            version: 1
            default_environment: other
            environments:
              target:
                base_url: \(baseURL)
                default_profile: svc
                profiles:
                  svc:
            \(lines)
              other:
                base_url: \(stack.rsURL)
                default_profile: svc
                profiles:
                  svc:
            \(lines)
            """)
    }

    /// Whether the resource server accepts `token` (it introspects it at the AS).
    static func isActive(_ token: String, at stack: InteropStack) async throws -> Bool {
        try await stack.curl(["-H", "Authorization: Bearer \(token)", "\(stack.rsURL)/whoami"]).status == 200
    }

    @Test func kubectlGetsInWithTheExecCredentialInBothAPIVersions() async throws {
        try await InteropStack.with { stack in
            let directory = try TemporaryDirectory.make()
            let cert = directory.appendingPathComponent("server.crt").path
            let key = directory.appendingPathComponent("server.key").path
            let openssl = try await InteropStack.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                ], in: directory, timeout: .seconds(60))
            #expect(openssl.status == 0, "\(openssl.stderr)")
            let stub = try await CredentialStub(mode: "kube", whoami: "\(stack.rsURL)/whoami", arguments: [cert, key])
            let config = try Self.config(stack, baseURL: "https://127.0.0.1:\(stub.port)")
            // The image's kubectl (1.32) speaks both; Debian's 1.20 (scripts/setup's fallback) only v1beta1.
            let version = try await InteropStack.run(
                "/usr/bin/kubectl", ["version", "--client", "-o", "json"], in: directory, timeout: .seconds(60),
                environment: Self.toolEnvironment(home: directory))
            let minor = try JSONParser.parse(version.stdout)["clientVersion"]?["minor"]?.stringValue ?? ""
            let speaksV1 = (Int(minor.filter(\.isNumber)) ?? 0) >= 22
            var apiVersions = ["client.authentication.k8s.io/v1beta1"]
            if speaksV1 { apiVersions.insert("client.authentication.k8s.io/v1", at: 0) }
            for apiVersion in apiVersions {
                let kubeconfig = directory.appendingPathComponent(
                    "kubeconfig-\(apiVersion.split(separator: "/").last ?? "")"
                ).path
                try Data(
                    """
                    apiVersion: v1
                    kind: Config
                    clusters:
                    - name: stub
                      cluster:
                        server: https://127.0.0.1:\(stub.port)
                        certificate-authority: \(cert)
                    users:
                    - name: relay
                      user:
                        exec:
                          apiVersion: \(apiVersion)
                          command: \(RelayProcess.binaryPath)
                          args: [token, --format, exec-credential, --config, \(config)]
                          interactiveMode: Never
                    contexts:
                    - name: stub
                      context: {cluster: stub, user: relay}
                    current-context: stub

                    """.utf8
                ).write(to: URL(fileURLWithPath: kubeconfig))
                let kubectl = try await InteropStack.run(
                    "/usr/bin/kubectl", ["--kubeconfig", kubeconfig, "get", "--raw", "/api"], in: directory,
                    timeout: .seconds(120), environment: Self.toolEnvironment(home: directory))
                #expect(kubectl.status == 0, "\(apiVersion): \(kubectl.stderr)")
                #expect(try JSONParser.parse(kubectl.stdout)["kind"] == "APIVersions", "\(kubectl.stdout)")
                let last = try #require(try stub.records().last)
                #expect(last["scheme"] == "bearer" && last["token_ok"] == true && last["status"] == 200)
                #expect(!kubectl.stderr.contains(Self.secret))
            }
            // Every token the stub let in came from the AS; the kubectl runs (each a new tokenrelay
            // process) shared one through the session store.
            #expect(try await stack.issuedCount(client: "svc") == 1)
        }
    }

    @Test func gitAuthenticatesThroughTheHelperOnlyForTheEnvironmentsOrigin() async throws {
        try await InteropStack.with { stack in
            let directory = try TemporaryDirectory.make()
            let environment = Self.toolEnvironment(home: directory)
            let root = directory.appendingPathComponent("repos")
            let work = directory.appendingPathComponent("work")
            for arguments in [
                ["init", "-q", "-b", "main", work.path],
                [
                    "-C", work.path, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q",
                    "--allow-empty",
                    "-m", "first",
                ],
                ["clone", "-q", "--bare", work.path, root.appendingPathComponent("repo.git").path],
            ] {
                let result = try await InteropStack.run(
                    "/usr/bin/git", arguments, in: directory, timeout: .seconds(60), environment: environment)
                #expect(result.status == 0, "git \(arguments): \(result.stderr)")
            }
            let stub = try await CredentialStub(mode: "git", whoami: "\(stack.rsURL)/whoami", arguments: [root.path])
            let config = try Self.config(
                stack, baseURL: "http://127.0.0.1:\(stub.port)", extra: ["git_username: relay-bot"])
            let helper = "credential.helper=!'\(RelayProcess.binaryPath)' token --format git --config '\(config)'"
            func git(_ arguments: [String], stdin: String? = nil) async throws -> (
                status: Int32, stdout: String, stderr: String
            ) {
                try await InteropStack.run(
                    "/usr/bin/git", ["-c", helper] + arguments, in: directory, timeout: .seconds(120), stdin: stdin,
                    environment: environment)
            }

            // `git credential fill` for the environment's origin: the profile's username and a live token.
            let fill = try await git(["credential", "fill"], stdin: "protocol=http\nhost=127.0.0.1:\(stub.port)\n\n")
            #expect(fill.status == 0, "\(fill.stderr)")
            let answer = Dictionary(
                fill.stdout.split(separator: "\n").map { line in
                    let parts = line.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }, uniquingKeysWith: { $1 })
            #expect(answer["username"] == "relay-bot")
            let password = try #require(answer["password"])
            #expect(try await Self.isActive(password, at: stack))
            #expect(!fill.stderr.contains(password))

            // Hosts no environment names (the same server by another name, another port, another
            // host): nothing, although the default environment has an exposed profile.
            for host in [
                "localhost:\(stub.port)", "127.0.0.1:\(stub.port == 65535 ? 1 : stub.port + 1)", "git.example.test",
            ] {
                let other = try await git(["credential", "fill"], stdin: "protocol=http\nhost=\(host)\n\n")
                #expect(other.status != 0, "\(host): \(other.stdout)")
                #expect(!other.stdout.contains("password="), "\(host)")
            }
            let issuedBefore = try await stack.issuedCount(client: "svc")

            // `git ls-remote` over smart HTTP: the helper's token opens the repository.
            let listed = try await git(["ls-remote", "http://127.0.0.1:\(stub.port)/repo.git"])
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.contains("refs/heads/main"))
            let records = try stub.records()
            #expect(records.contains { $0["user"] == "relay-bot" && $0["token_ok"] == true && $0["status"] == 200 })
            // The token `credential fill` got, shared through the session store: none issued anew.
            #expect(try await stack.issuedCount(client: "svc") == issuedBefore)

            // The same server under another name: git gets no credentials and never sends one.
            let refused = try await git(["ls-remote", "http://localhost:\(stub.port)/repo.git"])
            #expect(refused.status != 0)
            let sinceRefused = try stub.records().dropFirst(records.count)
            #expect(!sinceRefused.isEmpty && sinceRefused.allSatisfy { $0["scheme"] == "none" })
            #expect(try await stack.issuedCount(client: "svc") == issuedBefore)
        }
    }

    @Test func tokenGetAndTheTokenCommandRenderEveryFormatAndHonourMinValid() async throws {
        try await InteropStack.with(.init(accessTTL: 300)) { stack in
            let config = try Self.config(stack, baseURL: "http://127.0.0.1:1")
            let relay = try RelayProcess(
                ["--config", config, "--env", "target"], environment: ["SVC_SECRET": Self.secret], testMethods: false)
            let first = try await relay.call("token-get")
            let json = try #require(first["result"], "\(first.jsonText)")
            let token = try #require(json["access_token"]?.stringValue)
            #expect(json["token_type"] == "Bearer")
            #expect(json["expires_at"]?.stringValue?.hasSuffix("Z") == true)
            #expect(try await Self.isActive(token, at: stack))
            // Valid for 300 s: a 60 s minValid (the default) and 200 s keep it; 400 s renews first.
            #expect(
                try await relay.call("token-get", ["minValid": 200])["result"]?["access_token"]?.stringValue == token)
            let header = try await relay.call("token-get", ["format": "header"])
            #expect(header["result"]?.stringValue == "Authorization: Bearer \(token)")
            let renewed = try await relay.call("token-get", ["minValid": 400, "format": "exec-credential"])
            let credential = try #require(renewed["result"], "\(renewed.jsonText)")
            #expect(credential["apiVersion"] == "client.authentication.k8s.io/v1")
            #expect(credential["kind"] == "ExecCredential")
            let second = try #require(credential["status"]?["token"]?.stringValue)
            #expect(second != token)
            #expect(credential["status"]?["expirationTimestamp"]?.stringValue?.hasSuffix("Z") == true)
            #expect(try await Self.isActive(second, at: stack))
            #expect(try await stack.issuedCount(client: "svc") == 2)
            let beta = try await relay.call(
                "token-get", ["format": "exec-credential", "apiVersion": "client.authentication.k8s.io/v1beta1"])
            #expect(beta["result"]?["apiVersion"] == "client.authentication.k8s.io/v1beta1")
            #expect(beta["result"]?["status"]?["token"]?.stringValue == second)
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            #expect(!relay.stderrText.contains(token) && !relay.stderrText.contains(second))

            // The command prints the same renderings.
            func command(_ arguments: [String], execInfo: String? = nil) async throws -> (Int32, String, String) {
                var environment = ["SVC_SECRET": Self.secret]
                environment["KUBERNETES_EXEC_INFO"] = execInfo
                let process = try RelayProcess(
                    ["token", "--config", config, "--env", "target"] + arguments, environment: environment,
                    testMethods: false)
                try process.closeStdin()
                return (try await process.exitCode(), process.stdoutText, process.stderrText)
            }
            let (rawCode, raw, rawErrors) = try await command([])
            // Nothing on stderr but, at a plain store's first write (no secret service on a test
            // machine), the one line that says so (issue 50).
            let noise = rawErrors.split(separator: "\n").filter { !$0.contains("keeps tokens in plain text") }
            #expect(rawCode == 0 && raw.hasSuffix("\n") && noise.isEmpty, "\(rawErrors)")
            let rawToken = raw.trimmingCharacters(in: .newlines)
            #expect(try await Self.isActive(rawToken, at: stack))
            let (_, headerLine, _) = try await command(["--format", "header", "--min-valid", "2m"])
            #expect(headerLine.hasPrefix("Authorization: Bearer ") && headerLine.hasSuffix("\n"))
            let (_, jsonText, _) = try await command(["--format", "json"])
            #expect(try JSONParser.parse(jsonText)["token_type"] == "Bearer")
            let (_, execText, _) = try await command(
                ["--format", "exec-credential"],
                execInfo:
                    #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{"interactive":false}}"#
            )
            let exec = try JSONParser.parse(execText)
            #expect(exec["apiVersion"] == "client.authentication.k8s.io/v1beta1")
            #expect(try await Self.isActive(exec["status"]?["token"]?.stringValue ?? "", at: stack))
        }
    }

    @Test func aProfileThatNeedsALoginAgainAnswersInteractionRequiredWithExitNine() async throws {
        try await InteropStack.with { stack in
            // A refresh token the AS refuses (invalid_grant): only a person logging in can help.
            let config = try stack.writeConfig(profiles: [
                (
                    "stale",
                    [
                        "type: refresh_token", "issuer: \(stack.issuer)", "client_id: pwd",
                        "client_secret: { env: PWD_SECRET }", "refresh_token: { env: STALE_SEED }",
                        "expose_token: true",
                    ]
                )
            ])
            let process = try RelayProcess(
                ["token", "--config", config, "--format", "exec-credential"],
                environment: ["PWD_SECRET": "pwd-secret", "STALE_SEED": "rt-canary-never-issued-9a3f"],
                testMethods: false)
            try process.closeStdin()
            #expect(try await process.exitCode() == 9)
            #expect(process.stdoutText.isEmpty)
            #expect(process.stderrText.contains("interaction_required"), "\(process.stderrText)")
            #expect(!process.stderrText.contains("rt-canary-never-issued-9a3f"))
        }
    }
}

/// `Fixtures/credential_stub.py`: the HTTPS Kubernetes API stub or the smart-HTTP git server,
/// stopped with SIGKILL.
final class CredentialStub: Sendable {
    let fixture: FixtureServer
    let port: Int
    let logPath: String

    init(mode: String, whoami: String, arguments: [String]) async throws {
        let directory = try TemporaryDirectory.make()
        logPath = directory.appendingPathComponent("requests.log").path
        try Data().write(to: URL(fileURLWithPath: logPath))
        fixture = try await FixtureServer(
            script: RecordingServer.fixtures.appendingPathComponent("credential_stub.py").path,
            [mode, logPath, whoami] + arguments, words: 1)
        port = fixture.ports[0]
    }

    /// Every request received so far (`{path, scheme, user, token_ok, status}`), in order.
    func records() throws -> [JSONValue] {
        try String(contentsOfFile: logPath, encoding: .utf8).split(separator: "\n").map {
            try JSONParser.parse(String($0))
        }
    }
}
