import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Issue 34 through the real binary: a sealed store whose file someone else can write. A row made
/// plain, or the check record removed and every row made plain, never sends a planted token; a
/// refused store makes `status` exit 3; `check-config --resolve-secrets` reads the store key with
/// the parser `serve` uses.
@Suite struct SealedStoreEndToEndTests {
    static let key = "iY3b+0e2V2n0x7c4wQm1p3dQq6N6kH0gTzO3vJ3xqYs="
    static let planted = "planted-canary-token-3f9a"

    struct Setup {
        let wire: WireServer
        let state: String
        let config: String
        var database: String { state + "/sessions.db" }

        init() async throws {
            wire = try await WireServer(["api"])
            state = try TemporaryDirectory.make().path
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: state)
            config = try wire.clientCredentialsConfig(
                store: "{ type: sqlite, path: \(state)/sessions.db, encryption_key: { env: E2E_STORE_KEY } }")
        }

        func run(_ arguments: [String], key: String = SealedStoreEndToEndTests.key) async throws
            -> (code: Int32, process: RelayProcess)
        {
            let process = try RelayProcess(
                arguments + ["--config", config], environment: ["E2E_STORE_KEY": key, "E2E_SECRET": "s3cret"],
                testMethods: false)
            try process.closeStdin()
            return (try await process.exitCode(), process)
        }

        /// Runs SQL on the store file, as anyone who can write it could.
        func tamper(_ sql: String) async throws {
            let script = "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", script, database, sql]
            try process.run()
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    process.waitUntilExit()
                    done.resume()
                }
            }
            #expect(process.terminationStatus == 0)
        }

        /// The planted record, as plain JSON with a far expiry.
        var plantedPayload: String {
            #"{"tokenType":"Bearer","accessToken":"\#(SealedStoreEndToEndTests.planted)","expiresAt":4000000000}"#
        }

        func plantedWasSent() throws -> Bool {
            try wire.requests("api").contains { $0.header("Authorization").contains { $0.contains("planted") } }
        }
    }

    @Test func aRowMadePlainInASealedStoreIsRefusedAndNothingIsSent() async throws {
        let setup = try await Setup()
        let first = try await setup.run(["call", "GET", "/first"])
        #expect(first.code == 0, "\(first.process.stderrText)")
        try await setup.tamper("UPDATE sessions SET sealed = 0, payload = CAST('\(setup.plantedPayload)' AS BLOB);")
        let second = try await setup.run(["call", "GET", "/second"])
        #expect(second.code == 7, "\(second.process.stderrText)")
        #expect(second.process.stderrText.contains("store: "), "\(second.process.stderrText)")
        #expect(second.process.stderrText.contains("does not open under the store's key"))
        #expect(try !setup.plantedWasSent())
        #expect(try setup.wire.requests("api").allSatisfy { $0["target"]?.stringValue != "/second" })
    }

    @Test func aStrippedSealedStoreIsRefusedNotAdoptedAndStatusExits3() async throws {
        let setup = try await Setup()
        let first = try await setup.run(["call", "GET", "/first"])
        #expect(first.code == 0, "\(first.process.stderrText)")
        try await setup.tamper(
            "DELETE FROM meta WHERE name = 'check'; "
                + "UPDATE sessions SET sealed = 0, payload = CAST('\(setup.plantedPayload)' AS BLOB);")
        let second = try await setup.run(["call", "GET", "/second"])
        #expect(second.code == 3, "\(second.process.stderrText)")
        #expect(second.process.stderrText.contains("but no check record"), "\(second.process.stderrText)")
        #expect(try !setup.plantedWasSent())
        // `status` shows what it can, and exits 3 (README): the store is refused.
        let status = try await setup.run(["status"])
        #expect(status.code == 3, "\(status.process.stdoutText) \(status.process.stderrText)")
        #expect(status.process.stdoutText.contains("error: "), "\(status.process.stdoutText)")
        #expect(!status.process.stdoutText.contains(SealedStoreEndToEndTests.planted))
    }

    @Test(arguments: ["short-key", String(repeating: "ab", count: 31), "aGVsbG8="])
    func checkConfigRefusesAStoreKeyThatIsNot32Bytes(key: String) async throws {
        let setup = try await Setup()
        let refused = try await setup.run(["check-config", "--resolve-secrets"], key: key)
        #expect(refused.code != 0)
        let output = refused.process.stdoutText + refused.process.stderrText
        #expect(output.contains("store.encryption_key' must be 32 bytes in base64 or hex"), "\(output)")
        #expect(!output.contains(key))
        let accepted = try await setup.run(["check-config", "--resolve-secrets"])
        #expect(accepted.code == 0, "\(accepted.process.stdoutText) \(accepted.process.stderrText)")
    }
}

/// Issue 34, finding 4: a renewal lease held by a live process in another PID namespace (its pid
/// is 1 there, and names another process here) is waited for, not taken over.
@Suite struct ForeignLeaseHolderEndToEndTests {
    @Test(.enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")))
    func aHolderInAnotherPIDNamespaceIsWaitedForNotTakenOver() async throws {
        let wire = try await WireServer(["api"])
        let state = try TemporaryDirectory.make().path
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: state)
        let gate = state + "/lease-gate"
        #expect(mkfifo(gate, 0o600) == 0)
        let config = try TemporaryDirectory.file(
            """
            version: 1
            store: { type: sqlite, path: \(state)/sessions.db }
            default_environment: local
            environments:
              local:
                base_url: \(wire.origin("api"))
                # A safety net (it bounds the held token request too), not a bound measured here.
                timeout: 300s
                default_profile: svc
                profiles:
                  svc:
                    type: client_credentials
                    token_url: \(wire.origin("api"))/token
                    client_id: svc
                    client_secret: { env: E2E_SECRET }
            """)
        let secret = ["E2E_SECRET": "s3cret"]
        let holder = try RelayProcess(
            ["--config", config, "--log-level", "debug"],
            environment: secret.merging(["TOKENRELAY_TEST_LEASE_GATE": gate]) { $1 },
            launcher: ["/usr/bin/unshare", "--pid", "--fork", "--mount-proc"])
        let other = try RelayProcess(
            ["--config", config, "--log-level", "debug"], environment: secret, testMethods: false)
        try holder.send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/held"}}"#)
        try await holder.waitForStderr("test lease gate: holding the lease")
        try other.send(#"{"jsonrpc":"2.0","id":"w","method":"request","params":{"path":"/w"}}"#)
        try await other.waitForStderr("is held elsewhere; waiting")
        #expect(!other.stderrText.contains("taking over the lease"))
        // The holder goes on: its token is committed, and the waiter re-reads it instead of renewing.
        let fd = open(gate, O_WRONLY)
        #expect(fd >= 0)
        _ = write(fd, "x", 1)
        close(fd)
        #expect(try await holder.answer(id: "held")["result"]?["status"]?.intValue == 200)
        #expect(try await other.answer(id: "w")["result"]?["status"]?.intValue == 200)
        #expect(try wire.requests("api").filter { $0["target"]?.stringValue?.hasSuffix("/token") == true }.count == 1)
        #expect(!other.stderrText.contains("taking over the lease"))
        try holder.closeStdin()
        try other.closeStdin()
        _ = try await holder.exitCode()
        _ = try await other.exitCode()
    }
}
