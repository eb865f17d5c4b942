import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A private session bus with gnome-keyring's secret service on it, its keyring files in a folder
/// of the test's: what a desktop gives tokenrelay (issue 50).
final class PrivateSecretService: Sendable {
    static let tools = [
        "/usr/bin/dbus-daemon", "/usr/bin/dbus-send", "/usr/bin/gnome-keyring-daemon", "/usr/bin/secret-tool",
        "/usr/bin/gdbus",
    ]
    /// Whether the tools are installed (scripts/setup installs them; CI has them).
    static let available = tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

    let folder: String
    let address: String
    let bus: ChildProcess

    private init(folder: String, address: String, bus: ChildProcess) {
        self.folder = folder
        self.address = address
        self.bus = bus
    }

    /// Starts a bus on which nothing is activatable; `keyring`: gnome-keyring's daemon on it, its
    /// login collection created and unlocked with a password from stdin, and owning the secret
    /// service's name before this returns.
    static func start(keyring: Bool = true) async throws -> PrivateSecretService {
        // Directly under /tmp: the bus's socket and the keyring's control socket live in it, and a
        // Unix socket's path holds 107 bytes (the test scratch folder's paths are longer on CI).
        // The keyring daemon ends a moment after its bus and may write meanwhile: removed at exit.
        let folder = try TestScratch.socketFolder("desktop")
        for sub in ["/home", "/data", "/run"] {
            try FileManager.default.createDirectory(
                atPath: folder + sub, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let config = folder + "/bus.conf"
        try OffPool.write(
            """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(folder)/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
              </policy>
            </busconfig>
            """, to: config)
        // The address is printed once the bus listens (read off the cooperative pool).
        let output = try ChildProcess.makePipe()
        let bus: ChildProcess
        do {
            bus = try ChildProcess(
                "/usr/bin/dbus-daemon", ["--config-file=\(config)", "--nofork", "--print-address=1"],
                environment: ["PATH": "/usr/bin:/bin"], stdout: .descriptor(output.write), stderr: .null)
        } catch {
            close(output.read)
            close(output.write)
            throw error
        }
        close(output.write)
        let address = try await OffPool.run { () -> String in
            defer { close(output.read) }
            var printed: [UInt8] = []
            var byte: UInt8 = 0
            while !printed.contains(0x0A), read(output.read, &byte, 1) == 1 { printed.append(byte) }
            return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let desktop = PrivateSecretService(folder: folder, address: address, bus: bus)
        if keyring {
            let daemon = try await desktop.run(
                "/usr/bin/gnome-keyring-daemon", ["--unlock", "--components=secrets"], stdin: "test-pw")
            #expect(daemon.status == 0, "\(daemon.output)")
            // Its first process can exit before the daemon owns the secret service's name: wait for
            // the name (gdbus watches the bus; the bound is a safety net).
            let named = try await desktop.run(
                "/usr/bin/gdbus", ["wait", "--session", "--timeout", "60", "org.freedesktop.secrets"])
            try #require(named.status == 0, "the secret service never came up: \(named.output)")
        }
        return desktop
    }

    deinit {
        _ = bus.signal(SIGKILL)  // the keyring daemon leaves with its bus
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// What a process of this desktop gets: the bus and the private home.
    var environment: [String: String] {
        [
            "DBUS_SESSION_BUS_ADDRESS": address, "HOME": folder + "/home", "XDG_DATA_HOME": folder + "/data",
            "XDG_RUNTIME_DIR": folder + "/run",
        ]
    }

    /// Runs `tool` on this desktop to its end; its exit status and output (stdout, then stderr).
    /// Its output goes to files: gnome-keyring-daemon's first process exits once its daemon is
    /// ready, and the daemon keeps the descriptors it was given.
    @discardableResult
    func run(_ tool: String, _ arguments: [String], stdin: String? = nil) async throws -> (
        status: Int32, output: String
    ) {
        let result = try await InteropStack.run(
            tool, arguments, in: URL(fileURLWithPath: folder), timeout: .seconds(120), stdin: stdin,
            environment: environment.merging(["PATH": "/usr/bin:/bin"]) { $1 })
        return (result.status, result.stdout + result.stderr)
    }

    /// The store key the secret service holds for `store` (`secret-tool lookup`), if any.
    func key(for store: String) async throws -> String? {
        let found = try await run("/usr/bin/secret-tool", ["lookup", "application", "tokenrelay", "store", store])
        return found.status == 0 && !found.output.isEmpty ? found.output : nil
    }

    /// How many items name `store` (locked or not).
    func items(for store: String) async throws -> Int {
        let found = try await run(
            "/usr/bin/secret-tool", ["search", "--all", "application", "tokenrelay", "store", store])
        return found.output.components(separatedBy: "\n").filter { $0.hasPrefix("[/") }.count
    }
}

/// Issue 50: with no key configured, the store is sealed with a key the desktop's secret service
/// keeps, and where there is none it stays plain and says so; a store sealed so is never opened
/// or rewritten without that key.
@Suite(
    .serialized,
    .enabled(if: PrivateSecretService.available, "needs dbus-daemon, gnome-keyring and secret-tool (scripts/setup)"))
struct SecretServiceStoreEndToEndTests {
    struct Setup {
        let wire: WireServer
        let state: String
        var database: String { state + "/sessions.db" }

        init() async throws {
            wire = try await WireServer(["api"])
            state = try TemporaryDirectory.make().path
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: state)
        }

        /// A config whose `store` line is `store`.
        func config(_ store: String = "{ path: STORE }") throws -> String {
            try wire.clientCredentialsConfig(
                store: store.replacingOccurrences(of: "STORE", with: database), exposeToken: true)
        }

        /// Runs tokenrelay on `desktop` (no session bus at all when `nil`).
        func run(
            _ arguments: [String], on desktop: PrivateSecretService?, config: String,
            environment: [String: String] = [:]
        ) async throws -> (code: Int32, output: String) {
            var env = desktop?.environment ?? [:]
            env["E2E_SECRET"] = "s3cret"
            env.merge(environment) { $1 }
            let process = try RelayProcess(arguments + ["--config", config], environment: env, testMethods: false)
            try process.closeStdin()
            let code = try await process.exitCode()
            return (code, process.stdoutText + process.stderrText)
        }

        /// What the store holds: every session row and meta row (a refused open may still
        /// checkpoint the write-ahead log, so the file's bytes are not compared).
        func storeBytes() async throws -> Data {
            let script =
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                + "print(repr(c.execute('SELECT * FROM sessions ORDER BY id').fetchall()), "
                + "repr(c.execute('SELECT * FROM meta ORDER BY name').fetchall()))"
            let result = try await InteropStack.run(
                "/usr/bin/python3", ["-c", script, database], in: URL(fileURLWithPath: state), timeout: .seconds(60))
            return Data(result.stdout.utf8)
        }
    }

    /// No output may hold the key, as base64 or as hex.
    static func expectNoKey(_ key: String, in outputs: [String]) {
        let trimmed = key.trimmingCharacters(in: .whitespacesAndNewlines)
        let hex = Data(base64Encoded: trimmed).map { $0.map { String(format: "%02x", $0) }.joined() } ?? "?"
        for output in outputs {
            #expect(!output.contains(trimmed) && !output.lowercased().contains(hex), "key material in: \(output)")
        }
    }

    @Test func aNewStoreIsSealedWithTheSecretServicesKeyAndRefusedWhereItIsNotReachable() async throws {
        let setup = try await Setup()
        let desktop = try await PrivateSecretService.start()
        let config = try setup.config()
        let token = try await setup.run(["token"], on: desktop, config: config)
        #expect(token.code == 0, "\(token.output)")
        let status = try await setup.run(["status", "--json"], on: desktop, config: config)
        #expect(status.code == 0, "\(status.output)")
        #expect(status.output.contains(#""key":"secret_service""#), "\(status.output)")
        #expect(status.output.contains("sealed with a key from the secret service"))
        let key = try #require(try await desktop.key(for: setup.database))
        #expect(Data(base64Encoded: key.trimmingCharacters(in: .whitespacesAndNewlines))?.count == 32)
        #expect(try await desktop.items(for: setup.database) == 1)
        let issued = try #require(token.output.split(separator: "\n").first.map(String.init))
        #expect(try await setup.storeBytes().range(of: Data(issued.utf8)) == nil, "the token is sealed")
        // Where no secret service is reachable the sealed store is refused, and left as it was.
        let before = try await setup.storeBytes()
        let noBus = try await setup.run(["token"], on: nil, config: config)
        #expect(noBus.code == 3, "\(noBus.output)")
        #expect(noBus.output.contains("sealed with a key from the secret service, which is not reachable here"))
        #expect(noBus.output.contains("no session bus"), "\(noBus.output)")
        let noService = try await PrivateSecretService.start(keyring: false)
        let elsewhere = try await setup.run(["status"], on: noService, config: config)
        #expect(elsewhere.code == 3, "\(elsewhere.output)")
        #expect(elsewhere.output.contains("which is not reachable here (no secret service on the session bus"))
        #expect(try await setup.storeBytes() == before)
        Self.expectNoKey(key, in: [token.output, status.output, noBus.output, elsewhere.output])
    }

    @Test func aVanishedKeyRefusesTheStoreAndNothingIsOverwritten() async throws {
        let setup = try await Setup()
        let desktop = try await PrivateSecretService.start()
        let config = try setup.config()
        let token = try await setup.run(["token"], on: desktop, config: config)
        #expect(token.code == 0, "\(token.output)")
        let key = try #require(try await desktop.key(for: setup.database))
        try await desktop.run("/usr/bin/secret-tool", ["clear", "application", "tokenrelay", "store", setup.database])
        let before = try await setup.storeBytes()
        for command in [["token"], ["status"]] {
            let refused = try await setup.run(command, on: desktop, config: config)
            #expect(refused.code == 3, "\(refused.output)")
            #expect(refused.output.contains("the secret service holds no key for it"), "\(refused.output)")
            Self.expectNoKey(key, in: [refused.output])
        }
        #expect(try await setup.storeBytes() == before)
        #expect(try await desktop.items(for: setup.database) == 0, "no new key was made for a sealed store")
    }

    @Test func withoutASecretServiceANewStoreStaysPlainAndSaysSo() async throws {
        let setup = try await Setup()
        let config = try setup.config()
        let token = try await setup.run(["token"], on: nil, config: config)
        #expect(token.code == 0, "\(token.output)")
        #expect(token.output.contains("keeps tokens in plain text: no secret service here (no session bus"))
        // Said once per store: the next process's write (a renewal) does not warn again.
        let again = try await setup.run(["token", "--min-valid", "2h"], on: nil, config: config)
        #expect(again.code == 0, "\(again.output)")
        #expect(!again.output.contains("keeps tokens in plain text"), "\(again.output)")
        let status = try await setup.run(["status"], on: nil, config: config)
        #expect(token.output.contains("set store.encryption_key"))
        #expect(status.output.contains("(plain text: the store was written without a key"), "\(status.output)")
        // A plain store that holds records stays plain where a secret service appears.
        let desktop = try await PrivateSecretService.start()
        let later = try await setup.run(["status"], on: desktop, config: config)
        #expect(later.code == 0, "\(later.output)")
        #expect(later.output.contains("store rekey --new-key-keyring"), "\(later.output)")
        #expect(try await desktop.items(for: setup.database) == 0)
        // `key: keyring` requires the secret service's key: a plain store with records is refused.
        let required = try await setup.run(
            ["status"], on: desktop, config: try setup.config("{ path: STORE, key: keyring }"))
        #expect(required.code == 3, "\(required.output)")
    }

    @Test func aLockedCollectionIsNeverUnlockedAndANewStoreStaysPlain() async throws {
        let setup = try await Setup()
        let desktop = try await PrivateSecretService.start()
        let lock = try await desktop.run(
            "/usr/bin/dbus-send",
            [
                "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                "org.freedesktop.Secret.Service.Lock", "array:objpath:/org/freedesktop/secrets/collection/login",
            ])
        try #require(lock.status == 0, "\(lock.output)")
        let token = try await setup.run(["token"], on: desktop, config: try setup.config())
        #expect(token.code == 0, "\(token.output)")
        #expect(token.output.contains("plain text: no secret service here"), "\(token.output)")
        #expect(token.output.contains("locked"), "\(token.output)")
        #expect(try await desktop.items(for: setup.database) == 0)
        let required = try await setup.run(
            ["status"], on: desktop, config: try setup.config("{ path: STORE, key: keyring }"))
        #expect(required.code == 3, "\(required.output)")
    }

    @Test func twoProcessesCreatingTheKeyAtOnceMakeOneKey() async throws {
        let setup = try await Setup()
        let desktop = try await PrivateSecretService.start()
        let config = try setup.config()
        async let first = setup.run(["token"], on: desktop, config: config)
        async let second = setup.run(["token"], on: desktop, config: config)
        let (one, two) = try await (first, second)
        #expect(one.code == 0, "\(one.output)")
        #expect(two.code == 0, "\(two.output)")
        #expect(try await desktop.items(for: setup.database) == 1)
        let status = try await setup.run(["status"], on: desktop, config: config)
        #expect(
            status.code == 0 && status.output.contains("sealed with a key from the secret service"), "\(status.output)")
    }

    @Test func rekeyMovesAStoreToTheSecretServiceAndBackAndLogoutForgetsTheKey() async throws {
        let setup = try await Setup()
        let desktop = try await PrivateSecretService.start()
        let plain = try setup.config("{ path: STORE, key: none }")
        #expect(try await setup.run(["token"], on: desktop, config: plain).code == 0)
        let toKeyring = try await setup.run(["store", "rekey", "--new-key-keyring"], on: desktop, config: plain)
        #expect(toKeyring.code == 0, "\(toKeyring.output)")
        let key = try #require(try await desktop.key(for: setup.database))
        let automatic = try setup.config()
        let sealed = try await setup.run(["status"], on: desktop, config: automatic)
        #expect(
            sealed.code == 0 && sealed.output.contains("sealed with a key from the secret service"), "\(sealed.output)")
        #expect(sealed.output.contains("local/svc (client_credentials): valid"), "\(sealed.output)")
        // And back to a key of the user's: the secret service's item goes.
        let newKey = "iY3b+0e2V2n0x7c4wQm1p3dQq6N6kH0gTzO3vJ3xqYs="
        let away = try await setup.run(
            ["store", "rekey", "--new-key-env", "NEW_KEY"], on: desktop, config: automatic,
            environment: ["NEW_KEY": newKey])
        #expect(away.code == 0, "\(away.output)")
        #expect(try await desktop.items(for: setup.database) == 0)
        let configured = try setup.config("{ path: STORE, encryption_key: { env: NEW_KEY } }")
        let opened = try await setup.run(["status"], on: desktop, config: configured, environment: ["NEW_KEY": newKey])
        #expect(opened.code == 0 && opened.output.contains("valid"), "\(opened.output)")
        // Back again, then forgotten with the last session.
        #expect(
            try await setup.run(
                ["store", "rekey", "--new-key-keyring"], on: desktop, config: configured,
                environment: ["NEW_KEY": newKey]
            ).code == 0)
        let second = try #require(try await desktop.key(for: setup.database))
        let logout = try await setup.run(["logout", "--all", "--forget-key"], on: desktop, config: automatic)
        #expect(logout.code == 0, "\(logout.output)")
        #expect(logout.output.contains("the secret service's key for"), "\(logout.output)")
        #expect(try await desktop.items(for: setup.database) == 0)
        let afresh = try await setup.run(["token"], on: desktop, config: automatic)
        #expect(afresh.code == 0, "\(afresh.output)")
        Self.expectNoKey(key, in: [toKeyring.output, sealed.output, away.output, opened.output, logout.output])
        Self.expectNoKey(second, in: [logout.output, afresh.output])
    }

    @Test func bothSpellingsOfTheKeyAtOnceAreRefused() async throws {
        let setup = try await Setup()
        let config = try setup.config("{ path: STORE, key: keyring, encryption_key: { env: K } }")
        let checked = try await setup.run(["check-config"], on: nil, config: config)
        #expect(checked.code != 0)
        #expect(checked.output.contains("'store.key' and 'store.encryption_key' both give the store's key"))
    }
}
