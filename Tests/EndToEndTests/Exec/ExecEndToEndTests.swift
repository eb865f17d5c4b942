import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `tokenrelay exec` (SPEC §12) with `curl` as the child, against the recording server (which
/// logs every request it receives before answering, so "nothing was forwarded" is checked where
/// it happens).
@Suite struct ExecEndToEndTests {
    static let token = "exec-canary-token-5f2a9c17"
    static let otherSecret = "exec-canary-other-8d3e"

    struct Setup {
        let server: RecordingServer
        let configPath: String

        init(rules: String = "") async throws {
            server = try await RecordingServer()
            configPath = try TemporaryDirectory.file(
                """
                version: 1
                store: { type: memory }
                environments:
                  api:
                    base_url: \(server.origin)/api
                    default_profile: p
                    profiles:
                      p:
                        type: bearer
                        token: { env: E2E_EXEC_TOKEN }
                      other:
                        type: basic
                        username: u
                        password: { env: E2E_EXEC_OTHER }
                      person:
                        type: authorization_code
                        authorization_url: \(server.origin)/authorize
                        token_url: \(server.origin)/token
                        client_id: cli
                    exec:
                      env: { API_URL: "{url}", API_KEY: "{token}", API_HOST: "{host}" }
                \(rules)
                """)
        }

        /// Runs `tokenrelay exec --config PATH ARGS -- sh -c SCRIPT`.
        func exec(_ script: String, arguments: [String] = []) throws -> RelayProcess {
            let process = try RelayProcess(
                ["exec", "--config", configPath] + arguments + ["--", "/bin/sh", "-c", script],
                environment: [
                    "E2E_EXEC_TOKEN": ExecEndToEndTests.token, "E2E_EXEC_OTHER": ExecEndToEndTests.otherSecret,
                ],
                testMethods: false)
            try process.closeStdin()
            return process
        }
    }

    @Test func curlReachesTheAPIWithTheRealTokenAndNeverSeesIt() async throws {
        let setup = try await Setup()
        let process = try setup.exec(
            """
            env | sed 's/=.*//' | sort | tr '\\n' ' '; echo
            curl -sS -H "Authorization: Bearer $API_KEY" "$API_URL/echo?page=2"; echo
            curl -sS -u "anyone:$API_KEY" -X POST --data-binary 'hello body' "$API_URL/reflect"; echo
            """, arguments: ["--log-level", "info"])
        #expect(try await process.exitCode() == 0)
        let output = process.stdoutText
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(output) \(process.stderrText)")
        let names = Set(lines.first?.split(separator: " ").map(String.init) ?? [])
        #expect(names.isSuperset(of: ["TOKENRELAY_URL", "TOKENRELAY_TOKEN", "API_URL", "API_KEY", "API_HOST"]))
        // The variables the config's secrets are read from never reach the child.
        #expect(!names.contains("E2E_EXEC_TOKEN") && !names.contains("E2E_EXEC_OTHER"))
        // The echo of the Authorization header is masked for the child.
        #expect(output.contains("[REDACTED]"))
        #expect(!output.contains(Self.token) && !output.contains(Self.otherSecret))
        #expect(lines.count == 3 && lines[2] == "hello body")
        let echoed = try #require(try setup.server.last("/api/echo"))
        #expect(echoed.header("authorization") == ["Bearer \(Self.token)"])
        #expect(echoed.query == "page=2")
        let reflected = try #require(try setup.server.last("/api/reflect"))
        #expect(reflected.method == "POST" && reflected.body == Array("hello body".utf8))
        #expect(reflected.header("authorization") == ["Bearer \(Self.token)"])
        #expect(!process.stderrText.contains(Self.token))
        // Each forwarded request is logged at info: method, URL without query values, status.
        #expect(
            process.stderrText.contains("exec: GET \(setup.server.origin)/api/echo?page=… 200"), "\(process.stderrText)"
        )
        #expect(!process.stderrText.contains("page=2"))
    }

    @Test func everyRefusalSendsNothing() async throws {
        let setup = try await Setup(
            rules: """
                      deny: ["* /status/**"]
                """)
        let code = "-s -o /dev/null -w '%{http_code}\\n'"
        let auth = "-H \"Authorization: Bearer $API_KEY\""
        let process = try setup.exec(
            """
            curl \(code) "$API_URL/echo"
            curl \(code) -H "Authorization: Bearer wrong" "$API_URL/echo"
            curl \(code) \(auth) -H "Host: rebound.example" "$API_URL/echo"
            curl \(code) \(auth) --request-target "http://$API_HOST/api/echo" "$API_URL/echo"
            curl \(code) \(auth) -X CONNECT --request-target "$API_HOST" "$API_URL/echo"
            curl \(code) \(auth) --path-as-is "$API_URL/x/../echo"
            curl \(code) \(auth) "$API_URL/x%2Fy/echo"
            curl \(code) \(auth) "$API_URL/status/200"
            curl \(code) \(auth) "http://$API_HOST/nope/echo"
            """)
        #expect(try await process.exitCode() == 0)
        let codes = process.stdoutText.split(separator: "\n").map(String.init)
        #expect(codes == ["401", "401", "403", "400", "405", "400", "400", "403", "404"], "\(process.stderrText)")
        #expect(try setup.server.records().isEmpty)
    }

    @Test func aSessionThatNeedsAPersonIsA401NamingTheLoginAndNeverWaits() async throws {
        let setup = try await Setup()
        let process = try setup.exec(
            #"curl -s -o /dev/null -D - -H "Authorization: Bearer $API_KEY" "$API_URL/echo" | tr -d '\r'"#,
            arguments: ["--profile", "person"])
        #expect(try await process.exitCode() == 0)
        let head = process.stdoutText
        #expect(head.hasPrefix("HTTP/1.1 401 "), "\(head)")
        let challenge = head.split(separator: "\n").first { $0.lowercased().hasPrefix("www-authenticate:") }
        #expect(challenge?.contains("error=\"invalid_token\"") == true)
        #expect(challenge?.contains("tokenrelay login --env api --profile person") == true, "\(head)")
        #expect(process.stderrText.contains("tokenrelay login"))
        #expect(try setup.server.records().isEmpty)
    }

    @Test func theChildsExitStatusIsExecs() async throws {
        let setup = try await Setup()
        #expect(try await setup.exec("exit 7").exitCode() == 7)
        #expect(try await setup.exec("kill -TERM $$").exitCode() == 128 + SIGTERM)
        let missing = try setup.exec("exit 0", arguments: [])
        #expect(try await missing.exitCode() == 0)
    }

    @Test func sigtermIsForwardedAndTheEndpointClosesWithTheChild() async throws {
        let setup = try await Setup()
        let process = try setup.exec(
            """
            trap 'kill $!; echo got-term; exit 42' TERM
            echo "ready $API_HOST"
            sleep 600 & wait $!
            """)
        try await process.waitForStdout("ready") { String(decoding: $0, as: UTF8.self).contains("\n") }
        let host = try #require(
            process.stdoutText.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let port = try #require(host.split(separator: ":").last.flatMap { Int($0) })
        #expect(kill(process.pid, SIGTERM) == 0)
        #expect(try await process.exitCode() == 42)
        #expect(process.stdoutText.contains("got-term"))
        // Gone with the child: nothing listens on its port any more.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(connected != 0)
    }

    @Test func aUnixSocketServesTheChildAndIsRemovedAfter() async throws {
        let setup = try await Setup()
        // Directly under /tmp: a Unix socket's path holds 107 bytes (CI's scratch paths are longer).
        let socketPath = try TestScratch.socketFolder("exec") + "/relay.sock"
        let process = try setup.exec(
            """
            stat -c '%a' "\(socketPath)"
            curl -sS --unix-socket "\(socketPath)" -H "Authorization: Bearer $TOKENRELAY_TOKEN" "$API_URL/status/204" \\
              -o /dev/null -w '%{http_code}\\n'
            echo "$API_URL"
            """, arguments: ["--listen", "unix:\(socketPath)"])
        #expect(try await process.exitCode() == 0)
        let lines = process.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines == ["600", "204", "http://localhost/api"], "\(process.stderrText)")
        #expect(!FileManager.default.fileExists(atPath: socketPath))
        #expect(try setup.server.last("/api/status/204")?.header("authorization") == ["Bearer \(Self.token)"])
    }
}
