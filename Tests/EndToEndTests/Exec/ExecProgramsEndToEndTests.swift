import Foundation
import TestSupport
import Testing

/// `tokenrelay exec` with programs nobody here wrote (curl, git, the OpenAI SDK) against
/// `Fixtures/exec_upstream.py`: an API that answers only tokens its own client-credentials token
/// endpoint issued, so every success proves the relay obtained and attached a real token.
@Suite struct ExecProgramsEndToEndTests {
    static let clientSecret = "exec-client-secret-c0ffee42"

    struct Setup {
        let upstream: FixtureServer
        let configPath: String
        let gitRoot: URL
        let variables: [String: String]

        init(variables: [String: String] = [:]) async throws {
            self.variables = variables
            gitRoot = try TemporaryDirectory.make()
            upstream = try await FixtureServer(
                script: RecordingServer.fixtures.appendingPathComponent("exec_upstream.py").path,
                [ExecProgramsEndToEndTests.clientSecret, gitRoot.path], words: 1)
            let origin = "http://127.0.0.1:\(upstream.ports[0])"
            configPath = try TemporaryDirectory.file(
                """
                version: 1
                store: { type: memory }
                environments:
                  api:
                    base_url: \(origin)/api
                    # A safety net, not a bound measured here: 50 MiB through a Python upstream
                    # takes longer than the default 30 s beside a full parallel run.
                    timeout: 300s
                    profiles:
                      svc:
                        type: client_credentials
                        token_url: \(origin)/token
                        client_id: svc
                        client_secret: { env: E2E_EXEC_CLIENT_SECRET }
                    exec:
                      env: { OPENAI_BASE_URL: "{url}/v1", OPENAI_API_KEY: "{token}", API_URL: "{url}" }
                """)
        }

        /// Runs `tokenrelay exec --config PATH -- sh -c SCRIPT`.
        func exec(_ script: String) throws -> RelayProcess {
            let process = try RelayProcess(
                ["exec", "--config", configPath, "--", "/bin/sh", "-c", script],
                environment: [
                    "E2E_EXEC_CLIENT_SECRET": ExecProgramsEndToEndTests.clientSecret, "GIT_TERMINAL_PROMPT": "0",
                    "GIT_CONFIG_NOSYSTEM": "1",
                ].merging(variables) { _, given in given },
                testMethods: false)
            try process.closeStdin()
            return process
        }
    }

    @Test func anEventStreamArrivesEventByEventWithTheTokenMasked() async throws {
        let setup = try await Setup()
        let process = try setup.exec(
            #"curl -sS -N -H "Authorization: Bearer $TOKENRELAY_TOKEN" "$API_URL/events""#)
        #expect(try await process.exitCode() == 0)
        let events = process.stdoutText
        #expect(events.hasPrefix("id: 0\ndata: one\n\nid: 1\ndata: two\n\nid: 2\ndata: auth Bearer "), "\(events)")
        #expect(events.contains("data: auth Bearer [REDACTED]\n\n"))
        #expect(!events.contains("issued-"))
    }

    @Test func fiftyMebibytesGoBothWaysAtBoundedMemory() async throws {
        let setup = try await Setup(variables: ["UPLOAD_FILE": try TemporaryDirectory.make().path + "/upload"])
        let size = 50 << 20
        // The relay is the child's parent: its peak resident set is /proc/$PPID/status's VmHWM.
        let process = try setup.exec(
            """
            auth="Authorization: Bearer $TOKENRELAY_TOKEN"
            curl -sS -o /dev/null -w '%{size_download}\\n' -H "$auth" "$API_URL/big?bytes=\(size)"
            grep VmHWM /proc/$PPID/status | tr -dc 0-9; echo
            head -c \(size) /dev/zero > "$UPLOAD_FILE"
            curl -sS -H "$auth" -H 'Content-Type: application/octet-stream' --data-binary @"$UPLOAD_FILE" \\
              "$API_URL/upload"; echo
            head -c \(size) /dev/zero | curl -sS -H "$auth" -T - "$API_URL/upload"; echo
            grep VmHWM /proc/$PPID/status | tr -dc 0-9; echo
            rm "$UPLOAD_FILE"
            """)
        // 150 MiB through a Python upstream: minutes, not seconds, beside a full parallel run.
        #expect(try await process.exitCode(timeout: .seconds(300)) == 0)
        let lines = process.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.count == 5, "\(process.stdoutText) \(process.stderrText)")
        guard lines.count == 5 else { return }
        #expect(lines[0] == "\(size)")
        // A sized upload goes on sized; one the child sends chunked (curl -T -) goes on chunked.
        #expect(
            lines[2] == "\(size) sized" && lines[3] == "\(size) chunked", "\(lines) \(process.stderrText.suffix(3000))")
        // Well below the 50 MiB that crossed it each way (kB): bodies stream through.
        let peaks = [lines[1], lines[4]].compactMap { Int($0) }
        #expect(
            peaks.count == 2 && peaks.allSatisfy { $0 < 40 * 1024 }, "peak RSS (kB) after download, uploads: \(peaks)")
    }

    @Test func gitClonesAndPushesOverSmartHTTP() async throws {
        let setup = try await Setup()
        let bare = setup.gitRoot.appendingPathComponent("repo.git").path
        let seed = try TemporaryDirectory.make().path
        let work = try TemporaryDirectory.make().path
        let process = try setup.exec(
            """
            set -e
            git init -q -b main --bare "\(bare)"
            git -C "\(bare)" config http.receivepack true
            git init -q -b main "\(seed)"; cd "\(seed)"
            git -c user.name=t -c user.email=t@e commit -q --allow-empty -m first
            git push -q "\(bare)" HEAD:refs/heads/main
            url=$(echo "$API_URL" | sed "s#://#://x-access-token:$TOKENRELAY_TOKEN@#")/git/repo.git
            git clone -q "$url" "\(work)/clone"; cd "\(work)/clone"
            git log --format=%s
            echo pushed > file; git add file
            git -c user.name=t -c user.email=t@e commit -q -m second
            git push -q origin HEAD:main
            git -C "\(bare)" log --format=%s main
            """)
        #expect(try await process.exitCode() == 0, "\(process.stderrText)")
        #expect(process.stdoutText == "first\nsecond\nfirst\n")
        #expect(!process.stderrText.contains("issued-"))
    }

    @Test func theOpenAISDKCompletesAndStreamsThroughItsBaseURL() async throws {
        let setup = try await Setup()
        // The project's venv (scripts/setup installs the SDK from scripts/requirements-dev.txt).
        let pythonPath = RelayProcess.repositoryRoot.appendingPathComponent(".venv/bin/python").path
        let script = """
            import os, openai
            assert "issued-" not in os.environ["OPENAI_API_KEY"]
            client = openai.OpenAI(max_retries=0)
            answer = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
            print(answer.choices[0].message.content)
            stream = client.chat.completions.create(model="m2", messages=[{"role": "user", "content": "hi"}], stream=True)
            print("".join(chunk.choices[0].delta.content or "" for chunk in stream).strip())
            """
        let path = try TemporaryDirectory.file(script, name: "sdk.py")
        let process = try setup.exec("'\(pythonPath)' '\(path)'")
        #expect(try await process.exitCode() == 0, "\(process.stderrText)")
        #expect(process.stdoutText == "hello from m1\nhello from m2\n")
    }
}
