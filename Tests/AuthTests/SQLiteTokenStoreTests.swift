import Foundation
import Synchronization
import TestSupport
import Testing
import TokenRelayErrorKinds

@testable import TokenRelayAuth

/// A fresh private directory (0700) for one store test; removed at the end.
struct StoreDirectory: ~Copyable {
    let path: String

    init() throws {
        path = TestScratch.path("tokenrelay-store")
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    var database: String { path + "/sessions.db" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

let storeTestKey = "iY3b+0e2V2n0x7c4wQm1p3dQq6N6kH0gTzO3vJ3xqYs="
let otherStoreTestKey = String(repeating: "ab", count: 32)

func sessionKey(_ profile: String = "svc", environment: String = "dev") -> SessionKey {
    SessionKey(
        environment: environment, profile: profile,
        configuration: OAuthClientConfiguration(tokenURL: "https://as.example/token", clientID: "svc"))
}

func sampleTokens(_ suffix: String = "1") -> StoredTokens {
    StoredTokens(
        accessToken: "at-canary-\(suffix)-7d1f", receivedAt: Date(timeIntervalSince1970: 1_700_000_000),
        expiresAt: Date(timeIntervalSince1970: 1_700_003_600), refreshToken: "rt-canary-\(suffix)-9e2a", scope: "read")
}

func keyProvider(_ key: String) -> SecretProvider { SecretProvider { key } }

/// Expects `body` to throw an ``AuthError`` of kind `config` whose message contains `text`.
func expectStoreError(_ text: String, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected a store error containing '\(text)'")
    } catch let error as AuthError {
        #expect(error.errorKind == .config, "\(error)")
        #expect(error.description.contains(text), "\(error)")
    } catch {
        Issue.record("unexpected error \(error)")
    }
}

@Suite struct SQLiteTokenStoreTests {
    @Test func savedTokensComeBackInAnotherConnection() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let writer = SQLiteTokenStore(path: directory.database)
        let revision = try await writer.save(sampleTokens(), for: key)
        let reader = SQLiteTokenStore(path: directory.database)
        let loaded = try await reader.load(key)
        #expect(loaded?.accessToken == "at-canary-1-7d1f")
        #expect(loaded?.refreshToken == "rt-canary-1-9e2a")
        #expect(loaded?.expiresAt == Date(timeIntervalSince1970: 1_700_003_600))
        #expect(loaded?.scope == "read")
        #expect(loaded?.revision == revision)
        #expect(try await reader.load(StoreKey(session: sessionKey("other"))) == nil)
        try await reader.remove(key)
        #expect(try await writer.load(key) == nil)
        #expect(
            reader.info
                == TokenStoreInfo(
                    type: "sqlite", path: directory.database, encrypted: false,
                    schemaVersion: SQLiteTokenStore.schemaVersion, note: "plain text (store.key: none)"))
    }

    /// Another process that opens the store and closes it again must see this process's open
    /// connection: if it took itself for the last one, it would checkpoint and delete the
    /// write-ahead log this process goes on committing to, and those commits would be lost. (The
    /// descriptor the store's file was checked through, once closed, dropped SQLite's lock.)
    @Test func aCommitAfterAnotherProcessClosedItsConnectionIsKept() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let store = SQLiteTokenStore(path: directory.database)
        try await store.open()
        func sqlite(_ statement: String) throws -> String {
            let process = Process()
            let output = Pipe()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [
                "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall())",
                directory.database, statement,
            ]
            process.standardOutput = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return text
        }
        #expect(try sqlite("SELECT count(*) FROM sessions") == "[(0,)]\n")
        _ = try await store.save(sampleTokens(), for: key)
        #expect(try sqlite("SELECT count(*) FROM sessions") == "[(1,)]\n")
        #expect(FileManager.default.fileExists(atPath: directory.database + "-wal"))
    }

    @Test func aPreparedStoreOpensInTheBackgroundAndServesItsFirstRead() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let revision = try await SQLiteTokenStore(path: directory.database).save(sampleTokens(), for: key)
        let reader = SQLiteTokenStore(path: directory.database)
        reader.prepare()
        reader.prepare()
        // Opened on the store's thread, before anything asked for it.
        await reader.waitForQueuedWork()
        #expect(reader.info.schemaVersion == SQLiteTokenStore.schemaVersion)
        let loaded = try await reader.load(key)
        #expect(loaded?.accessToken == "at-canary-1-7d1f")
        #expect(loaded?.revision == revision)
        #expect(reader.info.schemaVersion == SQLiteTokenStore.schemaVersion)
    }

    @Test func aPreparedStoreThatCannotOpenIsReportedByItsFirstUse() async throws {
        let directory = try StoreDirectory()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let store = SQLiteTokenStore(path: directory.database)
        store.prepare()
        await store.waitForQueuedWork()
        #expect(store.info.schemaVersion == nil)
        await expectStoreError("accessible by group or others (mode 755)") {
            _ = try await store.load(StoreKey(session: sessionKey()))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.database))
    }

    @Test func aSealedStoreIsNotOpenedByPrepareWithoutItsKey() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
            .save(sampleTokens(), for: key)
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        store.prepare()
        await store.waitForQueuedWork()
        #expect(store.info.schemaVersion == nil)
        // The key resolves on first use, which then opens the file and reads the sealed record.
        #expect(try await store.load(key)?.accessToken == "at-canary-1-7d1f")
        #expect(store.info.encrypted)
    }

    @Test func aLogoutInAnotherProcessMakesAPendingSaveWriteNothing() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let renewer = SQLiteTokenStore(path: directory.database)
        let other = SQLiteTokenStore(path: directory.database)
        let epoch = try await renewer.logoutEpoch(key)
        #expect(try await renewer.save(sampleTokens(), for: key, logoutEpoch: epoch) == 1)
        try await other.logOut(key)
        #expect(try await renewer.save(sampleTokens(), for: key, logoutEpoch: epoch) == nil)
        #expect(try await other.load(key) == nil)
        // A renewal that started after the logout commits as usual.
        let next = try await renewer.logoutEpoch(key)
        #expect(next == epoch + 1)
        #expect(try await renewer.save(sampleTokens(), for: key, logoutEpoch: next) != nil)
        #expect(try await other.load(key)?.accessToken == "at-canary-1-7d1f")
    }

    @Test func callersWaitingForAnotherProcessesWriteLockLeaveTheCooperativePoolFree() async throws {
        let directory = try StoreDirectory()
        // Longer than any stall of a loaded test process's pool (the probe below runs on that
        // pool, shared with every other test: CI once took more than 10 s to start it). On the
        // cooperative pool the saves would hold its threads until this bound and then fail.
        let store = SQLiteTokenStore(path: directory.database, busyTimeout: .seconds(120))
        try await store.open()
        // Another process holds the write lock: every save waits for it (up to busy_timeout).
        let other = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        try other.execute("BEGIN IMMEDIATE")
        // More waiting callers than the cooperative pool has threads (one per core).
        let saves = (0..<16).map { index in
            Task { try await store.save(sampleTokens("\(index)"), for: StoreKey(session: sessionKey("p\(index)"))) }
        }
        // Work queued behind them still runs while they wait (it would only run after the busy
        // timeout if the waits held the pool's threads, and every save would then fail).
        let probe = Task { (0..<1000).reduce(0, +) }
        #expect(await probe.value == 499_500)
        try other.execute("COMMIT")
        for save in saves { #expect(try await save.value > 0) }
    }

    @Test func createsThePrivateDirectoryAndFile() async throws {
        let directory = try StoreDirectory()
        let path = directory.path + "/nested/state/sessions.db"
        let store = SQLiteTokenStore(path: path)
        try await store.open()
        let fileMode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        let directoryMode =
            try FileManager.default.attributesOfItem(atPath: directory.path + "/nested/state")[.posixPermissions]
            as? Int
        #expect(fileMode == 0o600)
        #expect(directoryMode == 0o700)
        let journal = try String(contentsOfFile: path, encoding: .isoLatin1)
        #expect(journal.hasPrefix("SQLite format 3"))
    }

    /// Processes started together (an MCP host opening three windows) all create the store's
    /// directory at once: none may see it in a moment when it is open to group and others. A
    /// create-then-chmod has that moment; `mkdir` with the mode does not.
    @Test func storesOpenedTogetherOnAMissingDirectoryAllOpen() throws {
        let directory = try StoreDirectory()
        let refusals = Mutex<[String]>([])
        // The window of a create-then-chmod is microseconds wide: enough rounds to meet it.
        for round in 0..<2000 {
            let path = directory.path + "/round\(round)/state/tokenrelay/sessions.db"
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do throws(AuthError) {
                    _ = try SQLiteTokenStore.prepareFile(path)
                } catch {
                    refusals.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(refusals.withLock { $0.first } == nil)
        let mode =
            try FileManager.default.attributesOfItem(
                atPath: directory.path + "/round0/state/tokenrelay")[.posixPermissions] as? Int
        #expect(mode == 0o700)
    }

    @Test func refusesAFileReadableByOthers() async throws {
        let directory = try StoreDirectory()
        _ = FileManager.default.createFile(
            atPath: directory.database, contents: nil, attributes: [.posixPermissions: 0o644])
        await expectStoreError("accessible by group or others (mode 644)") {
            try await SQLiteTokenStore(path: directory.database).open()
        }
    }

    @Test func refusesADirectoryOpenToOthers() async throws {
        let directory = try StoreDirectory()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        await expectStoreError("store directory \(directory.path) is accessible by group or others (mode 755)") {
            try await SQLiteTokenStore(path: directory.database).open()
        }
        #expect(!FileManager.default.fileExists(atPath: directory.database))
    }

    @Test(.enabled(if: geteuid() == 0, "only root can give a file to another user"))
    func refusesAFileOwnedBySomeoneElse() async throws {
        let directory = try StoreDirectory()
        _ = FileManager.default.createFile(
            atPath: directory.database, contents: nil, attributes: [.posixPermissions: 0o600])
        #expect(chown(directory.database, 65534, 65534) == 0)
        await expectStoreError("is owned by another user (uid 65534)") {
            try await SQLiteTokenStore(path: directory.database).open()
        }
    }

    @Test func migratesAnOlderSchemaKeepingItsSessions() async throws {
        let directory = try StoreDirectory()
        // A version-1 file, as an earlier tokenrelay left it.
        _ = FileManager.default.createFile(
            atPath: directory.database, contents: nil, attributes: [.posixPermissions: 0o600])
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            try connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            try connection.execute(SQLiteTokenStore.migrations[0])
            try connection.execute("INSERT INTO schema_version (version) VALUES (1)")
            try connection.query(
                "INSERT INTO sessions VALUES ('k', 'dev', 'svc', ?1, 0, 3, 0, 0)",
                [.blob(Array(#"{"tokenType":"Bearer","accessToken":"at-old"}"#.utf8))])
        }
        let store = SQLiteTokenStore(path: directory.database)
        try await store.open()
        #expect(store.info.schemaVersion == SQLiteTokenStore.schemaVersion)
        let connection = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        #expect(try connection.query("SELECT count(*) FROM sessions").first?.first == .integer(1))
        #expect(try connection.query("SELECT count(*) FROM spent_seeds").first?.first == .integer(0))
        #expect(try SQLiteTokenStore.storedVersion(connection) == SQLiteTokenStore.schemaVersion)
        // Version 5: the lease holder's host and PID namespace.
        let columns = try connection.query("SELECT name FROM pragma_table_info('leases')").compactMap {
            $0.first?.textValue
        }
        #expect(columns.contains("holder_host") && columns.contains("holder_namespace"), "\(columns)")
    }

    @Test func refusesANewerSchemaWithoutTouchingIt() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        try await SQLiteTokenStore(path: directory.database).save(sampleTokens(), for: key)
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            try connection.execute("UPDATE schema_version SET version = 99")
        }
        await expectStoreError(
            "schema version 99, newer than this tokenrelay knows (\(SQLiteTokenStore.schemaVersion))"
        ) {
            _ = try await SQLiteTokenStore(path: directory.database).load(key)
        }
        let connection = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        #expect(try connection.query("SELECT count(*) FROM sessions").first?.first == .integer(1))
        #expect(try SQLiteTokenStore.storedVersion(connection) == 99)
    }

    @Test func sealedRecordsOpenWithTheKeyAndNamedErrorsOtherwise() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        try await store.save(sampleTokens(), for: key)
        #expect(store.info.encrypted)
        let again = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        #expect(try await again.load(key)?.refreshToken == "rt-canary-1-9e2a")

        await expectStoreError("the encryption key does not open the store \(directory.database)") {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(otherStoreTestKey))
                .load(key)
        }
        await expectStoreError("the store \(directory.database) is encrypted; configure store.encryption_key") {
            _ = try await SQLiteTokenStore(path: directory.database).load(key)
        }
        // A resolved key is registered with the process-wide redactor, which every suite in this
        // process shares: a unique value, so no other test's message (a word like "short") gets masked.
        let badKey = "not-a-key-\(UUID().uuidString)"
        await expectStoreError("must be 32 bytes in base64 or hex") {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(badKey)).load(key)
        }
        // Nothing was overwritten by the failed opens.
        #expect(try await again.load(key)?.accessToken == "at-canary-1-7d1f")
    }

    @Test func aTamperedRecordIsToldApartFromAWrongKey() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        try await store.save(sampleTokens(), for: key)
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            let payload = try connection.query("SELECT payload FROM sessions").first?.first?.blobValue ?? []
            var tampered = payload
            tampered[tampered.count - 1] ^= 0x01  // the GCM tag
            try connection.query("UPDATE sessions SET payload = ?1", [.blob(tampered)])
        }
        do {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey)).load(key)
            Issue.record("a tampered record was accepted")
        } catch let error as AuthError {
            #expect(error.description.contains("does not open under the store's key (tampered or corrupted)"))
            #expect(error.errorKind == .store)
            #expect(!error.description.contains("wrong key"))
            #expect(!error.description.contains("re-keyed"))
        }
    }

    @Test func aRecordCannotBeMovedToAnotherSession() async throws {
        let directory = try StoreDirectory()
        let first = StoreKey(session: sessionKey("a"))
        let second = StoreKey(session: sessionKey("b"))
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        try await store.save(sampleTokens("a"), for: first)
        try await store.save(sampleTokens("b"), for: second)
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            try connection.query(
                "UPDATE sessions SET payload = (SELECT payload FROM sessions WHERE id = ?1) WHERE id = ?2",
                [.text(first.id), .text(second.id)])
        }
        await #expect(throws: AuthError.self) {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
                .load(second)
        }
    }

    @Test func theSealedFileHoldsNoTokenInAnyEncoding() async throws {
        let directory = try StoreDirectory()
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        var values: [String] = []
        for index in 0..<20 {
            let tokens = sampleTokens("\(index)")
            values += [tokens.accessToken ?? "", tokens.refreshToken ?? ""]
            try await store.save(tokens, for: StoreKey(session: sessionKey("p\(index % 3)")))
        }
        var bytes: [UInt8] = []
        for suffix in ["", "-wal", "-shm"] {
            if let data = FileManager.default.contents(atPath: directory.database + suffix) { bytes += data }
        }
        let haystack = Data(bytes)
        for value in values {
            let encodings = [
                Data(value.utf8), Data(Data(value.utf8).base64EncodedString().utf8),
                Data(StoreKey.hex(Array(value.utf8)).utf8), Data(StoreKey.hex(Array(value.utf8)).uppercased().utf8),
            ]
            for encoding in encodings { #expect(haystack.range(of: encoding) == nil, "found \(value)") }
        }
    }

    @Test func rekeyReSealsEveryRecord() async throws {
        let directory = try StoreDirectory()
        let keys = (0..<3).map { StoreKey(session: sessionKey("p\($0)")) }
        let store = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        for (index, key) in keys.enumerated() { try await store.save(sampleTokens("\(index)"), for: key) }
        try await store.rekey(to: otherStoreTestKey)
        let reopened = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(otherStoreTestKey))
        for (index, key) in keys.enumerated() {
            #expect(try await reopened.load(key)?.accessToken == "at-canary-\(index)-7d1f")
        }
        await expectStoreError("does not open the store") {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
                .load(keys[0])
        }
    }

    /// Issue 44 (SPEC §5.6): a rekey takes every session's renewal lease first. While a renewal
    /// holds one it waits (saying for what), and past its bound it gives up having changed
    /// nothing; once the renewal has ended it re-seals, and takes no lease it does not give back.
    @Test func aRekeyWaitsForEverySessionsRenewalLease() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let renewing = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        try await renewing.save(sampleTokens(), for: key)
        let lease = try await renewing.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(60), expiresAt: Date().addingTimeInterval(600))
        let told = Mutex<[String]>([])
        let rekeying = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        await expectStoreError("did not end in time; nothing was changed") {
            try await rekeying.rekey(to: otherStoreTestKey, leaseWait: .zero) { message in
                told.withLock { $0.append(message) }
            }
        }
        #expect(told.withLock { $0 } == ["waiting for the renewal of dev/svc in process \(getpid()) to end"])
        #expect(try await renewing.load(key)?.accessToken == "at-canary-1-7d1f", "still sealed under the old key")

        renewing.releaseLease(lease)
        try await rekeying.rekey(to: otherStoreTestKey)
        let reopened = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(otherStoreTestKey))
        #expect(try await reopened.load(key)?.accessToken == "at-canary-1-7d1f")
        // The rekey's leases are given back (queued on its own connection): a renewal gets it.
        let next = try await reopened.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(60), expiresAt: Date().addingTimeInterval(60))
        reopened.releaseLease(next)
    }

    /// Issue 34, finding 1: a key never adopts unsealed records. A plain store (or one whose check
    /// record was removed) that holds records is refused with a key, and sealed on purpose by
    /// `store rekey` run without one.
    @Test func aPlainStoreIsSealedByRekeyNotByAKeyAlone() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        try await SQLiteTokenStore(path: directory.database).save(sampleTokens(), for: key)
        await expectStoreError("holds 1 session record(s) but no check record") {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
                .load(key)
        }
        try await SQLiteTokenStore(path: directory.database).rekey(to: storeTestKey)
        let sealed = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        #expect(try await sealed.load(key)?.accessToken == "at-canary-1-7d1f")
        let contents = FileManager.default.contents(atPath: directory.database) ?? Data()
        let wal = FileManager.default.contents(atPath: directory.database + "-wal") ?? Data()
        #expect((contents + wal).range(of: Data("rt-canary-1-9e2a".utf8)) == nil)
    }

    /// Issue 34, finding 1: in a sealed store, a row whose `sealed` column was set to 0 and that
    /// holds a plain-text record is refused: nothing of it is read.
    @Test func aRowMarkedPlainInASealedStoreIsRefused() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
            .save(sampleTokens(), for: key)
        let planted = SQLiteTokenStore.Payload(
            accessToken: "planted-canary-51c3", tokenType: "Bearer", receivedAt: nil, expiresAt: 4_000_000_000,
            refreshToken: nil, scope: nil)
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            try connection.query("UPDATE sessions SET payload = ?1, sealed = 0", [.blob(planted.json)])
        }
        do {
            let loaded = try await SQLiteTokenStore(
                path: directory.database, encryptionKey: keyProvider(storeTestKey)
            ).load(key)
            Issue.record("a plain row was accepted in a sealed store: \(String(describing: loaded))")
        } catch let error as AuthError {
            #expect(error.errorKind == .store, "\(error)")
            #expect(error.description.contains("does not open under the store's key"), "\(error)")
        }
    }

    /// Issue 34, finding 1 (sibling): the check record removed and every row made plain: a keyed
    /// process does not "seal a plain store for the first time" and adopt the planted rows.
    @Test func aStrippedSealedStoreIsNotAdoptedByItsKey() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
            .save(sampleTokens(), for: key)
        let planted = SQLiteTokenStore.Payload(
            accessToken: "planted-canary-51c3", tokenType: "Bearer", receivedAt: nil, expiresAt: 4_000_000_000,
            refreshToken: nil, scope: nil)
        do {
            let connection = try SQLiteConnection(
                path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
            try connection.query("DELETE FROM meta WHERE name = 'check'")
            try connection.query("UPDATE sessions SET payload = ?1, sealed = 0", [.blob(planted.json)])
        }
        await expectStoreError("but no check record") {
            _ = try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
                .load(key)
        }
        // Refused as it was: no check record was written, nothing sealed.
        let connection = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        #expect(try connection.query("SELECT count(*) FROM meta WHERE name = 'check'").first?.first == .integer(0))
    }

    /// Issue 34, finding 5: a commit of a process that still holds the old key, after a `store
    /// rekey` elsewhere, writes nothing under the old key and says the store was re-keyed.
    @Test func aCommitAfterARekeyElsewhereSaysReKeyedAndWritesNothing() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let serving = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        try await serving.save(sampleTokens("1"), for: key)
        try await SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
            .rekey(to: otherStoreTestKey)
        for body in [
            { _ = try await serving.save(sampleTokens("2"), for: key) },
            { _ = try await serving.load(key) },
        ] as [() async throws -> Void] {
            do {
                try await body()
                Issue.record("the old key was used after a rekey")
            } catch let error as AuthError {
                #expect(error.errorKind == .config, "\(error)")
                #expect(error.description.contains("was re-keyed"), "\(error)")
                #expect(!error.description.contains("tampered"), "\(error)")
                #expect(!error.description.contains("log out"), "\(error)")
            }
        }
        let rekeyed = SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(otherStoreTestKey))
        #expect(try await rekeyed.load(key)?.accessToken == "at-canary-1-7d1f")
    }

    /// Issue 34, extras: the store's directory or file as a symbolic link is refused.
    @Test func aSymbolicLinkAsTheStoreDirectoryOrFileIsRefused() async throws {
        let directory = try StoreDirectory()
        let real = directory.path + "/real"
        try FileManager.default.createDirectory(
            atPath: real, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/linked", withDestinationPath: real)
        await expectStoreError("is a symbolic link") {
            _ = try await SQLiteTokenStore(path: directory.path + "/linked/sessions.db").load(
                StoreKey(session: sessionKey()))
        }
        try await SQLiteTokenStore(path: real + "/sessions.db").save(
            sampleTokens(), for: StoreKey(session: sessionKey()))
        try FileManager.default.createSymbolicLink(
            atPath: real + "/alias.db", withDestinationPath: real + "/sessions.db")
        await expectStoreError("is a symbolic link") {
            _ = try await SQLiteTokenStore(path: real + "/alias.db").load(StoreKey(session: sessionKey()))
        }
    }

    @Test func invalidationsAreRecordedPerRevision() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let first = SQLiteTokenStore(path: directory.database)
        let second = SQLiteTokenStore(path: directory.database)
        let revision = try await first.save(sampleTokens(), for: key)
        _ = try await second.load(key)
        #expect(try await !second.recordInvalidation(key, revision: revision - 1))  // an older token: no effect
        #expect(try await first.load(key)?.invalidated == false)
        #expect(try await second.recordInvalidation(key, revision: revision))
        #expect(try await !first.recordInvalidation(key, revision: revision), "already invalidated")
        #expect(try await first.load(key)?.invalidated == true)
        let next = try await first.save(sampleTokens("2"), for: key)
        #expect(next == revision + 1)
        #expect(try await second.load(key)?.invalidated == false)
    }

    @Test func anotherConnectionsCommitIsSeenByTheChangeCheck() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let first = SQLiteTokenStore(path: directory.database)
        let second = SQLiteTokenStore(path: directory.database)
        try await first.open()
        try await second.open()
        #expect(!first.changedElsewhere())
        try await first.save(sampleTokens(), for: key)
        #expect(!first.changedElsewhere(), "its own commit is no change elsewhere")
        #expect(second.changedElsewhere())
        #expect(!second.changedElsewhere(), "seen once")
    }

    @Test func aLeaseIsExclusiveUntilReleasedOrItsHolderIsGone() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let first = SQLiteTokenStore(path: directory.database)
        let second = SQLiteTokenStore(path: directory.database)
        let lease = try await first.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        await #expect(throws: AuthError.timeout) {
            _ = try await second.acquireLease(
                key, purpose: .renewal, deadline: Date().addingTimeInterval(0.2),
                expiresAt: Date().addingTimeInterval(60))
        }
        first.releaseLease(lease)
        let taken = try await second.acquireLease(
            key, purpose: .login, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        second.releaseLease(taken)

        // A lease row whose holder process is gone (pid 2^22 + 1 is above Linux's pid_max default
        // of 2^22, so it never runs) is taken over at once.
        let connection = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        try connection.query(
            """
            INSERT OR REPLACE INTO leases (id, holder_pid, holder_start, owner, purpose, expires_at)
            VALUES (?1, 4194305, 1, 7, 'renewal', ?2)
            """,
            [.text(key.id), .real(Date().addingTimeInterval(600).timeIntervalSince1970)])
        let takenOver = try await second.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        second.releaseLease(takenOver)
        // One held by this process under another start time (a reused pid) is gone too.
        try connection.query(
            """
            INSERT OR REPLACE INTO leases (id, holder_pid, holder_start, owner, purpose, expires_at)
            VALUES (?1, ?2, 1, 7, 'renewal', ?3)
            """,
            [.text(key.id), .integer(Int64(getpid())), .real(Date().addingTimeInterval(600).timeIntervalSince1970)])
        let reused = try await second.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        second.releaseLease(reused)
    }

    /// Issue 34, finding 4: a pid is checked only in the reader's own PID namespace on its own
    /// host; a holder recorded elsewhere binds until its lease expires, whatever its pid is here.
    @Test func aLeaseHolderInAnotherNamespaceOrHostBindsUntilItsExpiry() {
        let reader = LeaseHolder(pid: 100, start: 5, host: "boot-a/host-a", namespace: "pid:[4026531836]")
        let gone: (Int32) -> Int64? = { _ in nil }
        let now = 1_000.0
        func binds(_ holder: LeaseHolder, expiresAt: Double = 2_000, startTime: (Int32) -> Int64? = gone) -> Bool {
            LeaseHolder.binds(holder, expiresAt: expiresAt, now: now, reader: reader, startTime: startTime)
        }
        var foreign = reader
        foreign.pid = 1
        foreign.namespace = "pid:[4026532999]"
        #expect(binds(foreign), "another PID namespace: its pid means nothing here")
        #expect(binds(foreign, startTime: { _ in 77 }), "pid 1 alive here with another start time")
        #expect(!binds(foreign, expiresAt: 999), "past its expiry")
        var otherHost = reader
        otherHost.host = "boot-b/host-b"
        #expect(binds(otherHost))
        // Here: judged by pid and start time.
        #expect(!binds(reader), "its pid is gone")
        #expect(binds(reader, startTime: { $0 == 100 ? 5 : nil }))
        #expect(!binds(reader, startTime: { _ in 6 }), "its pid was reused")
        // A row of an earlier version names no host or namespace: judged by pid, as before.
        let older = LeaseHolder(pid: 100, start: 5, host: "", namespace: "")
        #expect(!binds(older))
        #expect(binds(older, startTime: { _ in 5 }))
        // A reader that cannot read its own identity waits for a holder that recorded one.
        var blind = reader
        blind.host = ""
        blind.namespace = ""
        #expect(LeaseHolder.binds(reader, expiresAt: 2_000, now: now, reader: blind, startTime: gone))
    }

    /// Issue 34, finding 4, through the store: a lease row of a holder in another PID namespace
    /// (its pid dead here) is waited for, not taken over; once expired it is taken.
    @Test func aLeaseRowOfAnotherNamespaceIsWaitedForNotTakenOver() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let store = SQLiteTokenStore(path: directory.database)
        try await store.open()
        let me = LeaseHolder.current
        #expect(!me.namespace.isEmpty && me.host.count > 1, "\(me)")
        let connection = try SQLiteConnection(path: directory.database, create: false, busyTimeoutMilliseconds: 1000)
        func plant(expiresIn seconds: Double) throws {
            try connection.query(
                """
                INSERT OR REPLACE INTO leases
                    (id, holder_pid, holder_start, owner, purpose, expires_at, holder_host, holder_namespace)
                VALUES (?1, 4194305, 1, 7, 'renewal', ?2, ?3, 'pid:[1]')
                """,
                [.text(key.id), .real(Date().addingTimeInterval(seconds).timeIntervalSince1970), .text(me.host)])
        }
        try plant(expiresIn: 600)
        await #expect(throws: AuthError.timeout) {
            _ = try await store.acquireLease(
                key, purpose: .renewal, deadline: Date().addingTimeInterval(0.3),
                expiresAt: Date().addingTimeInterval(60))
        }
        try plant(expiresIn: -1)
        let taken = try await store.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        store.releaseLease(taken)
    }

    /// A login's lease is not the renewal lease: a login waiting for a person does not stop the
    /// session's renewals (issue 34: the decision is in ``SQLiteTokenStore/leaseRow(_:_:)``).
    @Test func aLoginLeaseDoesNotBlockRenewals() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let first = SQLiteTokenStore(path: directory.database)
        let second = SQLiteTokenStore(path: directory.database)
        let login = try await first.acquireLease(
            key, purpose: .login, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        let renewal = try await second.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        await #expect(throws: AuthError.timeout) {
            _ = try await second.acquireLease(
                key, purpose: .login, deadline: Date().addingTimeInterval(0.2), expiresAt: Date().addingTimeInterval(60)
            )
        }
        second.releaseLease(renewal)
        first.releaseLease(login)
    }

    @Test func withLeaseRunsTheBodyHoldingTheLease() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let store = SQLiteTokenStore(path: directory.database)
        let other = SQLiteTokenStore(path: directory.database)
        let value = try await store.withLease(
            key, purpose: .login, deadline: Date().addingTimeInterval(5), lifetime: .seconds(60)
        ) { () async throws -> Int in
            await #expect(throws: AuthError.timeout) {
                _ = try await other.acquireLease(
                    key, purpose: .login, deadline: Date().addingTimeInterval(0.1),
                    expiresAt: Date().addingTimeInterval(60))
            }
            return 42
        }
        #expect(value == 42)
        let after = try await other.acquireLease(
            key, purpose: .login, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        other.releaseLease(after)
    }

    /// Four encrypted stores on `directory`'s database (as four processes) each saving `rounds`
    /// tokens for `key` at once (tokens `w<store>-<round>`); returns the stores.
    private func savedByFourStoresAtOnce(_ directory: borrowing StoreDirectory, _ key: StoreKey, rounds: Int)
        async throws
        -> [SQLiteTokenStore]
    {
        let stores = (0..<4).map { _ in
            SQLiteTokenStore(path: directory.database, encryptionKey: keyProvider(storeTestKey))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    for round in 0..<rounds {
                        try await store.save(sampleTokens("w\(index)-\(round)"), for: key)
                    }
                }
            }
            try await group.waitForAll()
        }
        return stores
    }

    /// Stores (processes) opening a new encrypted store at once: the first to seal writes the
    /// check record; another that found none before taking the write lock verifies it there
    /// instead of re-sealing, with no key, the records already sealed.
    @Test func concurrentFirstOpensOfAnEncryptedStoreAgree() async throws {
        for _ in 0..<20 {
            let directory = try StoreDirectory()
            let key = StoreKey(session: sessionKey())
            let stores = try await savedByFourStoresAtOnce(directory, key, rounds: 1)
            #expect(try await stores[0].load(key)?.revision == 4)
        }
    }

    @Test func concurrentWritersEachCommitAtomically() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let stores = try await savedByFourStoresAtOnce(directory, key, rounds: 25)
        let loaded = try await stores[0].load(key)
        #expect(loaded?.revision == 100)
        // The access and refresh tokens come from the same save.
        let suffix = loaded?.accessToken?.replacingOccurrences(of: "at-canary-", with: "").replacingOccurrences(
            of: "-7d1f", with: "")
        #expect(loaded?.refreshToken == "rt-canary-\(suffix ?? "")-9e2a")
    }

    @Test func spentSeedsAndUnexplainedRenewalsAreShared() async throws {
        let directory = try StoreDirectory()
        let key = StoreKey(session: sessionKey())
        let first = SQLiteTokenStore(path: directory.database)
        let second = SQLiteTokenStore(path: directory.database)
        #expect(try await !second.isSeedSpent("f1"))
        try await first.markSeedSpent("f1")
        #expect(try await second.isSeedSpent("f1"))
        let now = Date()
        #expect(try await first.recordUnexplainedRenewal(key, at: now, window: 30) == 0)
        #expect(try await second.recordUnexplainedRenewal(key, at: now.addingTimeInterval(1), window: 30) == 1)
        #expect(try await first.recordUnexplainedRenewal(key, at: now.addingTimeInterval(40), window: 30) == 0)
        try await second.clearUnexplainedRenewals(key)
        #expect(try await first.recordUnexplainedRenewal(key, at: now.addingTimeInterval(41), window: 30) == 0)
    }

    @Test func storeKeysSeparateEverythingThatChangesTheToken() {
        let base = StoreKey(session: sessionKey())
        #expect(base == StoreKey(session: sessionKey()))
        #expect(base.id == StoreKey(session: sessionKey()).id)
        #expect(base.id != StoreKey(session: sessionKey("other")).id)
        #expect(base.id != StoreKey(session: sessionKey(), seedFingerprint: "ab").id)
        #expect(
            StoreKey(session: sessionKey(), seedFingerprint: "ab").id
                != StoreKey(session: sessionKey(), seedFingerprint: "cd").id)
        #expect(base.id.count == 64)
    }

    @Test func keysDecodeFromHexAndBase64() {
        #expect(SQLiteTokenStore.decodeKey(storeTestKey)?.count == 32)
        #expect(SQLiteTokenStore.decodeKey(otherStoreTestKey + "\n") == [UInt8](repeating: 0xab, count: 32))
        #expect(SQLiteTokenStore.decodeKey("not a key") == nil)
        #expect(SQLiteTokenStore.decodeKey(String(repeating: "ab", count: 16)) == nil)
        let made = SQLiteTokenStore.newKey()
        #expect(made.flatMap(SQLiteTokenStore.decodeKey)?.count == 32)
        #expect(made != SQLiteTokenStore.newKey())
        // URL-safe base64 without padding reads as the same key as standard base64.
        let bytes = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
        #expect(SQLiteTokenStore.decodeKey(Base64URL.encode(bytes)) == bytes)
        #expect(SQLiteTokenStore.decodeKey(" \t" + Data(bytes).base64EncodedString() + "\r\n") == bytes)
        #expect(SQLiteTokenStore.trimmedKeyText("\n key \n") == "key")
        #expect(SQLiteTokenStore.trimmedKeyText(" \n ") == "")
    }

    @Test(arguments: [
        ("/home/u/.local/state/tokenrelay/sessions.db", "/home/u/.local/state/tokenrelay"), ("/sessions.db", "/"),
        ("sessions.db", "."), ("state/sessions.db", "state"), ("/a/b/", "/a"), ("/", "/"),
    ])
    func theStoresDirectoryIsWhatPrecedesTheLastSlash(path: String, directory: String) {
        #expect(SQLiteTokenStore.directoryPart(of: path) == directory)
    }
}

/// A record's plaintext reads the same as earlier versions wrote it (Foundation's `JSONEncoder`
/// over a `Codable` struct of these members) and is readable by them.
@Suite struct StoreRecordFormatTests {
    /// The record as earlier versions declared it.
    struct CodableRecord: Codable, Equatable {
        var accessToken: String?
        var tokenType: String
        var receivedAt: Double?
        var expiresAt: Double?
        var refreshToken: String?
        var scope: String?
    }

    static let records = [
        CodableRecord(
            accessToken: "at-ü-\"quoted\"\n", tokenType: "Bearer", receivedAt: 1_764_640_000.123456,
            expiresAt: 1_764_643_600.5, refreshToken: "rt/+=", scope: "read write"),
        CodableRecord(
            accessToken: nil, tokenType: "DPoP", receivedAt: 1e-7, expiresAt: 0.1 + 0.2, refreshToken: "rt",
            scope: nil),
        CodableRecord(
            accessToken: "at", tokenType: "Bearer", receivedAt: 1_700_000_000, expiresAt: nil, refreshToken: nil,
            scope: ""),
    ]

    static func payload(_ record: CodableRecord) -> SQLiteTokenStore.Payload {
        SQLiteTokenStore.Payload(
            accessToken: record.accessToken, tokenType: record.tokenType, receivedAt: record.receivedAt,
            expiresAt: record.expiresAt, refreshToken: record.refreshToken, scope: record.scope)
    }

    @Test(arguments: records)
    func recordsOfEarlierVersionsReadExactly(record: CodableRecord) throws {
        let written = Array(try JSONEncoder().encode(record))
        #expect(SQLiteTokenStore.Payload(json: written) == Self.payload(record))
    }

    @Test(arguments: records)
    func recordsWrittenNowReadExactlyInEarlierVersions(record: CodableRecord) throws {
        let written = Self.payload(record).json
        #expect(try JSONDecoder().decode(CodableRecord.self, from: Data(written)) == record)
        #expect(SQLiteTokenStore.Payload(json: written) == Self.payload(record))
    }

    @Test(arguments: [
        #"[]"#, #"{}"#, #"{"tokenType":1}"#, #"{"tokenType":null}"#, #"{"tokenType":"Bearer","accessToken":5}"#,
        #"{"tokenType":"Bearer","expiresAt":"soon"}"#, #"{"tokenType":"Bearer","scope":["read"]}"#, "not json",
    ])
    func recordsOfTheWrongShapeAreNotRead(text: String) {
        #expect(SQLiteTokenStore.Payload(json: Array(text.utf8)) == nil)
    }

    @Test func nullMembersReadAsAbsent() {
        let text = #"{"tokenType":"Bearer","accessToken":null,"refreshToken":null,"expiresAt":null}"#
        #expect(
            SQLiteTokenStore.Payload(json: Array(text.utf8))
                == SQLiteTokenStore.Payload(
                    accessToken: nil, tokenType: "Bearer", receivedAt: nil, expiresAt: nil, refreshToken: nil,
                    scope: nil))
    }
}
