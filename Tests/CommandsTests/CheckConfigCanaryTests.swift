import Foundation
import TestSupport
import Testing
import TokenRelayConfig

/// A config holding known secrets in every kind of source, with mistakes elsewhere: no output of
/// check-config, in any mode, may contain any of the secrets.
@Suite struct CheckConfigCanaryTests {
    @Test(arguments: [
        [String](), ["--json"], ["--resolve-secrets"], ["--resolve-secrets", "--json"],
    ])
    func secretsNeverReachAnyOutput(flags: [String]) async throws {
        let tag = UUID().uuidString.prefix(8)
        let inline = "canary-inline-\(tag)"
        let fromEnv = "canary-env-\(tag)"
        let fromFile = "canary-file-\(tag)"
        let fromCommand = "canary-command-\(tag)"
        let fromFailingCommand = "canary-failing-\(tag)"
        let inVariable = "canary-variable-\(tag)"
        let yaml = """
            version: 1
            environments:
              e:
                base_url: https://api.example.com
                timeout: ${SLOW}
                proxy: ${SLOW}
                profiles:
                  a: { type: bearer, token: \(inline), cache: nonsense }
                  b: { type: bearer, token: { env: CANARY }, cache: 5m, extra: \(inline) }
                  c: { type: basic, username: u, password: { file: secret.txt }, client_id: x }
                  d: { type: bearer, token: { command: [python3, -c, "print('\(fromCommand)')"] } }
                  f: { type: bearer, token: { command: [python3, -c, "import sys; print('\(fromFailingCommand)'); sys.exit(2)"] } }
                  g: { type: api_key, header: "bad header", value: \(inline) }
            store: { type: memory, path: x }
            """
        let files = InMemoryFileSystem(["/cfg/config.yaml": yaml])
        files.write(fromFile + "\n", toPath: "/cfg/secret.txt", mode: 0o644)
        var environment = commandEnvironment
        environment["CANARY"] = fromEnv
        environment["SLOW"] = inVariable
        let (status, output) = await runCheckConfig(
            ["--config", "/cfg/config.yaml"] + flags, environment: environment, files: files)
        #expect(status == 1)
        let everything = output.standardOutput + output.standardError
        #expect(!everything.isEmpty)
        for secret in [inline, fromEnv, fromFile, fromCommand, fromFailingCommand, inVariable] {
            #expect(!everything.contains(secret), "leaked \(secret.prefix(14)) in: \(everything)")
        }
        if flags.contains("--resolve-secrets") {
            #expect(everything.contains("python3 exited with status 2"))
        }
    }
}
