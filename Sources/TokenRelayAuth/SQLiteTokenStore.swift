import CSQLite
import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayHTTPFields
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// The default token store (SPEC §5.6): one SQLite file shared by every tokenrelay process of
/// the user, in WAL mode, tokens sealed with AES-256-GCM when a key is given.
///
/// The file is opened on first use (a start that needs no token does not load libsqlite3). Its
/// directory must be 0700 and the file 0600, both owned by the user: they are created so, and
/// anything else is refused with a `config` error. Every call runs a few short statements on one
/// connection, on the store's own thread (never on the cooperative pool: a statement may
/// wait up to `busy_timeout` for another process's write lock), awaited by the caller; no
/// transaction is ever open across an `await`.
public final class SQLiteTokenStore: TokenStore {
    /// The newest schema this build knows. Migrations take an older file there step by step; a
    /// newer file is refused (never wiped).
    public static var schemaVersion: Int { migrations.count }

    /// Schema migrations: `migrations[n]` takes version `n` to `n + 1`.
    static let migrations: [String] = [
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY, environment TEXT NOT NULL, profile TEXT NOT NULL,
            payload BLOB NOT NULL, sealed INTEGER NOT NULL, revision INTEGER NOT NULL,
            invalidated INTEGER NOT NULL DEFAULT 0, updated_at REAL NOT NULL);
        CREATE TABLE leases (
            id TEXT PRIMARY KEY, holder_pid INTEGER NOT NULL, holder_start INTEGER NOT NULL,
            owner INTEGER NOT NULL, purpose TEXT NOT NULL, expires_at REAL NOT NULL);
        CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
        """,
        """
        CREATE TABLE renewals (id TEXT NOT NULL, at REAL NOT NULL);
        CREATE INDEX renewals_by_session ON renewals (id, at);
        CREATE TABLE spent_seeds (fingerprint TEXT PRIMARY KEY, spent_at REAL NOT NULL);
        """,
        """
        CREATE TABLE logouts (id TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
        """,
        registrationsMigration,
        // The lease holder's host and PID namespace (``LeaseHolder``): a pid names a process only
        // there. A row of an earlier version has neither ('') and is judged by its pid, as it was.
        """
        ALTER TABLE leases ADD COLUMN holder_host TEXT NOT NULL DEFAULT '';
        ALTER TABLE leases ADD COLUMN holder_namespace TEXT NOT NULL DEFAULT '';
        """,
    ]

    /// Where the database is.
    public let path: String
    /// Where the key comes from.
    public let keySource: StoreKeySource
    let busyTimeoutMilliseconds: Int32

    struct Opened {
        let connection: SQLiteConnection
        var cipher: StoreCipher?
        let schemaVersion: Int
        var dataVersion: Int64
        /// With a key: the check record this process verified opens under it (compared with the
        /// stored one in every write transaction: another one means the store was re-keyed).
        var checkRecord: [UInt8]?
        /// What sealed the store (`nil`: plain text).
        var keyKind: StoreKeyKind?
        /// Which it is, in a sentence (``TokenStoreInfo/note``).
        var note: String
        /// Whether the first write of this process said which it is.
        var announced = false
    }

    /// What `info` shows of the opened store.
    struct OpenedInfo {
        var schemaVersion: Int
        var keyKind: StoreKeyKind?
        var note: String
    }

    /// Locked on `queue` only, apart from ``changedElsewhere()``'s non-waiting look (so a
    /// statement waiting for another process's lock never blocks a thread of the cooperative pool).
    let state = Mutex<Opened?>(nil)
    /// Runs every statement, one at a time, off the cooperative pool, on the store's own thread
    /// (``prepare()`` can start it before libcurl's load, during which no thread can be made).
    let queue = SerialThread(named: "relay-store")
    /// What `info` shows of the opened store (schema version, sealing), readable from any thread.
    let openedInfo = Mutex<OpenedInfo?>(nil)

    /// A store at `path` (opened on first use), sealing tokens under the key from `encryptionKey`
    /// (base64 or hex of 32 bytes) when given, in plain text otherwise.
    public convenience init(path: String, encryptionKey: SecretProvider? = nil, busyTimeout: Duration = .seconds(5)) {
        self.init(path: path, key: encryptionKey.map { .configured($0) } ?? .none, busyTimeout: busyTimeout)
    }

    /// A store at `path` (opened on first use) whose key comes from `key`.
    public init(path: String, key: StoreKeySource, busyTimeout: Duration = .seconds(5)) {
        self.path = path
        self.keySource = key
        busyTimeoutMilliseconds = Int32(busyTimeout.components.seconds * 1000)
    }

    /// The configured key, if the store has one.
    var encryptionKey: SecretProvider? {
        if case .configured(let provider) = keySource { return provider }
        return nil
    }

    public var info: TokenStoreInfo {
        guard let opened = openedInfo.withLock({ $0 }) else {
            return TokenStoreInfo(type: "sqlite", path: path, encrypted: encryptionKey != nil)
        }
        return TokenStoreInfo(
            type: "sqlite", path: path, encrypted: opened.keyKind != nil, schemaVersion: opened.schemaVersion,
            key: opened.keyKind?.rawValue, note: opened.note)
    }

    // MARK: - Opening

    /// Opens the store now (resolving the key): errors of kind `config` for a bad file, directory
    /// or key. Idempotent.
    public func open() async throws {
        if openedInfo.withLock({ $0 != nil }) { return }
        var plan = KeyPlan.plain
        switch keySource {
        case .none: break
        case .secretService(let required): plan = .secretService(required: required)
        case .configured(let encryptionKey):
            let text: String
            do {
                text = try await encryptionKey.resolve()
            } catch {
                throw AuthError.store("the encryption key of the store \(path) could not be resolved: \(error)")
            }
            guard let bytes = Self.decodeKey(text), let made = StoreCipher(key: bytes) else {
                throw AuthError.store("the encryption key of the store \(path) \(StoreKeyText.requirement)")
            }
            plan = .configured(made)
        }
        try await onQueue { [plan] in try self.openOnQueue(plan).get() }
    }

    /// For a one-shot command that will read the store: loads libsqlite3 and libcrypto (the store
    /// key's digest) on the caller's thread (a `dlopen` each), starts the store's thread
    /// and queues the opening on it, then returns without waiting for the opening, which runs
    /// beside whatever the command does next (`call` loads libcurl then). A store sealed with a
    /// key is opened on first use instead (its key may take a command to resolve); one whose key
    /// the secret service holds is opened here, on the store's thread. Nothing is
    /// reported here: a library that cannot be loaded or an opening that fails is met again, and
    /// reported, by the first use (so a command that fails before it uses the store may still
    /// have created or migrated the file).
    public func prepare() {
        guard tr_sqlite_load() == 1, LibCrypto.load() else { return }
        queue.start()
        guard openedInfo.withLock({ $0 == nil }) else { return }
        let plan: KeyPlan
        switch keySource {
        case .configured: return
        case .none: plan = .plain
        case .secretService(let required): plan = .secretService(required: required)
        }
        queue.async { _ = self.openOnQueue(plan) }
    }

    /// Waits until everything queued on the store's thread so far has run (tests: what
    /// ``prepare()`` queued).
    func waitForQueuedWork() async {
        _ = try? await onQueue {}
    }

    /// Opens the connection unless it is open. Only on `queue`.
    private func openOnQueue(_ plan: KeyPlan) -> Result<Void, AuthError> {
        state.withLock { opened -> Result<Void, AuthError> in
            if opened != nil { return .success(()) }
            do throws(AuthError) {
                let made = try openConnection(plan)
                opened = made
                publishInfo(made)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
    }

    /// Runs `body` on the store's queue and waits for it without holding a cooperative thread.
    func onQueue<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// The key as ``decodeKey(_:)`` reads it: `text` without leading and trailing white space
    /// and newlines (a key file's final newline, a pasted key's spaces).
    public static func trimmedKeyText(_ text: String) -> String { StoreKeyText.trimmed(text) }

    /// Decodes a 32-byte key given as hex (64 digits) or base64 (standard or URL-safe): the one
    /// parser, shared with `check-config --resolve-secrets`.
    static func decodeKey(_ text: String) -> [UInt8]? { StoreKeyText.decode(text) }

    /// A fresh random key, base64 (`tokenrelay store new-key`).
    public static func newKey() -> String? {
        LibCrypto.randomBytes(StoreCipher.keyLength).map { Data($0).base64EncodedString() }
    }

    private func openConnection(_ plan: KeyPlan) throws(AuthError) -> Opened {
        let checked = try Self.prepareFile(path)
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(
                path: path, create: false, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
            // What SQLite opened (by path) must be the file checked through its descriptor: the
            // path still names it, and a descriptor other than the checker's is open on it (SQLite
            // opens the file in `sqlite3_open_v2`, or reuses one of its own descriptors on the same
            // file). One swapped in between, or its directory, is refused.
            var info = stat()
            let stillThere = lstat(path, &info) == 0 && FileIdentity(info) == checked.identity
            let held = Self.descriptors(on: checked.identity, excluding: checked.file).map { !$0.isEmpty } ?? true
            guard stillThere, held else {
                throw AuthError.store("the store file \(path) was replaced while it was being opened; refusing it")
            }
            checked.handFile(to: connection)
            try Self.retryingWhileBusy(timeoutMilliseconds: busyTimeoutMilliseconds) { () throws(SQLiteError) in
                try connection.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA secure_delete=ON;")
            }
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.store("the store \(path) could not be opened (\(error))")
        }
        let version = try migrate(connection)
        let sealing = try sealing(connection, plan)
        let dataVersion = (try? Self.dataVersion(connection)) ?? 0
        return Opened(
            connection: connection, cipher: sealing.cipher, schemaVersion: version, dataVersion: dataVersion,
            checkRecord: sealing.check, keyKind: sealing.kind, note: sealing.note)
    }

    /// Makes what `info` shows of the store `opened`.
    func publishInfo(_ opened: Opened) {
        openedInfo.withLock {
            $0 = OpenedInfo(schemaVersion: opened.schemaVersion, keyKind: opened.keyKind, note: opened.note)
        }
    }

    /// Runs `body` again, after a short pause, while SQLite answers busy, up to
    /// `timeoutMilliseconds`. For what SQLite refuses at once instead of calling its busy handler:
    /// turning a new store's journal into a write-ahead log while another process opening the
    /// same new store holds a lock on it.
    static func retryingWhileBusy(timeoutMilliseconds: Int32, _ body: () throws(SQLiteError) -> Void)
        throws(SQLiteError)
    {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMilliseconds)
        var pause: UInt32 = 1_000
        while true {
            do throws(SQLiteError) {
                try body()
                return
            } catch {
                guard error.isBusy, ContinuousClock.now < deadline else { throw error }
                usleep(pause)
                pause = min(pause * 2, 50_000)
            }
        }
    }

    /// Takes the file to ``schemaVersion``; refuses a newer one.
    private func migrate(_ connection: SQLiteConnection) throws(AuthError) -> Int {
        do {
            try connection.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            let known = Self.migrations.count
            let current = try Self.storedVersion(connection)
            if current == known { return current }
            if current > known { throw newerSchema(current) }
            try connection.execute("BEGIN IMMEDIATE")
            do {
                var version = try Self.storedVersion(connection)  // another process may have migrated
                if version > known { throw newerSchema(version) }
                while version < known {
                    try connection.execute(Self.migrations[version])
                    version += 1
                }
                try connection.query("DELETE FROM schema_version")
                try connection.query("INSERT INTO schema_version (version) VALUES (?1)", [.integer(Int64(version))])
                try connection.execute("COMMIT")
                return version
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.store("the schema of the store \(path) could not be migrated (\(error))")
        }
    }

    private func newerSchema(_ version: Int) -> AuthError {
        AuthError.store(
            "the store \(path) has schema version \(version), newer than this tokenrelay knows "
                + "(\(Self.migrations.count)); upgrade tokenrelay or use another store path (the file was left as is)")
    }

    static func storedVersion(_ connection: SQLiteConnection) throws(SQLiteError) -> Int {
        Int(try connection.query("SELECT max(version) FROM schema_version").first?.first?.integerValue ?? 0)
    }

    // MARK: - Records

    /// A record's plaintext: a JSON object of `accessToken`, `tokenType`, `receivedAt` and
    /// `expiresAt` (seconds since 1970), `refreshToken`, `scope` and `subject`, each absent when there is
    /// none (the members Codable gave the records of earlier versions). Read and written with
    /// tokenrelay's one JSON parser and serialiser; a double keeps its exact value through
    /// its shortest round-tripping literal.
    struct Payload: Equatable {
        var accessToken: String?
        var tokenType: String
        var receivedAt: Double?
        var expiresAt: Double?
        var refreshToken: String?
        var scope: String?
        var subject: String? = nil
        /// DPoP: the session's key (``DPoPKey/stored``).
        var dpopKey: String? = nil
    }

    /// Runs `body` on the open connection (opening it first), on the store's queue.
    func withConnection<T: Sendable>(_ body: @escaping @Sendable (inout Opened) throws -> T) async throws -> T {
        try await open()
        return try await onQueue {
            try self.withOpened(body) ?? { throw AuthError.storage("the store is not open") }()
        }
    }

    /// Runs `body` on the connection, on the store's queue, if the store is open; `nil` when it is not.
    func ifOpen<T: Sendable>(_ body: @escaping @Sendable (inout Opened) throws -> T) async throws -> T? {
        try await onQueue { try self.withOpened(body) }
    }

    /// Runs `body` on the connection if the store is open; `nil` when it is not. Only on `queue`.
    func withOpened<T>(_ body: (inout Opened) throws -> T) throws -> T? {
        let result = state.withLock { opened -> Result<T?, any Error> in
            guard var current = opened else { return .success(nil) }
            defer { opened = current }
            do {
                return .success(try body(&current))
            } catch let error as SQLiteError {
                return .failure(AuthError.storage("the store \(path) failed (\(error.message))"))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    public func load(_ key: StoreKey) async throws -> StoredTokens? {
        let id = key.id
        return try await withConnection { opened in
            let rows = try opened.connection.query(
                "SELECT payload, sealed, revision, invalidated FROM sessions WHERE id = ?1", [.text(id)])
            guard let row = rows.first, let payload = row[0].blobValue else { return nil }
            let plain = try self.openRecord(
                payload, markedSealed: row[1].integerValue == 1, id: id, key: key, opened: &opened)
            guard let decoded = Payload(json: plain) else {
                throw AuthError.storage("the record of \(key) in the store \(self.path) is not readable")
            }
            return StoredTokens(
                accessToken: decoded.accessToken, tokenType: decoded.tokenType,
                receivedAt: decoded.receivedAt.map { Date(timeIntervalSince1970: $0) },
                expiresAt: decoded.expiresAt.map { Date(timeIntervalSince1970: $0) },
                refreshToken: decoded.refreshToken,
                scope: decoded.scope, revision: row[2].integerValue ?? 0, invalidated: row[3].integerValue == 1,
                subject: decoded.subject, dpopKey: decoded.dpopKey)
        }
    }

    public func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64? {
        let payload = Payload(
            accessToken: tokens.accessToken, tokenType: tokens.tokenType,
            receivedAt: tokens.receivedAt?.timeIntervalSince1970, expiresAt: tokens.expiresAt?.timeIntervalSince1970,
            refreshToken: tokens.refreshToken, scope: tokens.scope, subject: tokens.subject, dpopKey: tokens.dpopKey)
        let plain = payload.json
        let id = key.id
        return try await withConnection { opened in
            let connection = opened.connection
            // One transaction: the key check, the logout epoch read and the write are atomic
            // together, durable before it returns. The record is sealed under the key the store
            // has now (a `store rekey` in another process holds the write lock across its whole
            // re-seal, so it is either all before this or all after).
            try connection.execute("BEGIN IMMEDIATE")
            do {
                try self.checkKeyIsCurrent(&opened)
                let (stored, sealed) = try self.seal(plain, id: id, cipher: opened.cipher)
                if let logoutEpoch, try Self.logoutEpoch(connection, key) != logoutEpoch {
                    try connection.execute("ROLLBACK")
                    return nil
                }
                let rows = try connection.query(
                    """
                    INSERT INTO sessions (id, environment, profile, payload, sealed, revision, invalidated, updated_at)
                    VALUES (?1, ?2, ?3, ?4, ?5, 1, 0, ?6)
                    ON CONFLICT (id) DO UPDATE SET payload = excluded.payload, sealed = excluded.sealed,
                        revision = sessions.revision + 1, invalidated = 0, updated_at = excluded.updated_at
                    RETURNING revision
                    """,
                    [
                        .text(id), .text(key.session.environment), .text(key.session.profile), .blob(stored),
                        .integer(sealed ? 1 : 0), .real(Date().timeIntervalSince1970),
                    ])
                self.announceFirstWrite(&opened)
                try connection.execute("COMMIT")
                return rows.first?.first?.integerValue ?? 0
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    public func remove(_ key: StoreKey) async throws {
        try await withConnection { opened in
            try opened.connection.query("DELETE FROM sessions WHERE id = ?1", [.text(key.id)])
            try opened.connection.query("DELETE FROM renewals WHERE id = ?1", [.text(key.id)])
        }
    }

    public func logoutEpoch(_ key: StoreKey) async throws -> Int64 {
        try await withConnection { opened in try Self.logoutEpoch(opened.connection, key) }
    }

    static func logoutEpoch(_ connection: SQLiteConnection, _ key: StoreKey) throws(SQLiteError) -> Int64 {
        try connection.query("SELECT epoch FROM logouts WHERE id = ?1", [.text(key.id)]).first?.first?
            .integerValue ?? 0
    }

    public func logOut(_ key: StoreKey) async throws {
        try await withConnection { opened in
            let connection = opened.connection
            try connection.execute("BEGIN IMMEDIATE")
            do {
                try connection.query("DELETE FROM sessions WHERE id = ?1", [.text(key.id)])
                try connection.query("DELETE FROM renewals WHERE id = ?1", [.text(key.id)])
                try connection.query(
                    "INSERT INTO logouts (id, epoch) VALUES (?1, 1) ON CONFLICT (id) DO UPDATE SET epoch = epoch + 1",
                    [.text(key.id)])
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    @discardableResult
    public func recordInvalidation(_ key: StoreKey, revision: Int64?) async throws -> Bool {
        try await ifOpen { opened in
            if let revision {
                try opened.connection.query(
                    "UPDATE sessions SET invalidated = 1 WHERE id = ?1 AND revision = ?2 AND invalidated = 0",
                    [.text(key.id), .integer(revision)])
            } else {
                try opened.connection.query("UPDATE sessions SET invalidated = 1 WHERE id = ?1", [.text(key.id)])
            }
            return opened.connection.changes > 0
        } ?? false
    }

    /// Runs on the caller's thread (it is on every request's path) but never waits: while a
    /// statement holds the connection on the store's queue, it answers `true` (the caller then
    /// re-reads through the queue, which changes nothing when nothing changed).
    public func changedElsewhere() -> Bool {
        let answer = state.withLockIfAvailable { opened -> Bool in
            guard var current = opened else { return false }
            defer { opened = current }
            guard let version = try? Self.dataVersion(current.connection) else {
                return true  // let the reload report it
            }
            defer { current.dataVersion = version }
            return version != current.dataVersion
        }
        return answer ?? true
    }

    static func dataVersion(_ connection: SQLiteConnection) throws(SQLiteError) -> Int64 {
        try connection.query("PRAGMA data_version").first?.first?.integerValue ?? 0
    }

    // MARK: - Seeds and renewal counts

    public func isSeedSpent(_ fingerprint: String) async throws -> Bool {
        try await withConnection { opened in
            try !opened.connection.query("SELECT 1 FROM spent_seeds WHERE fingerprint = ?1", [.text(fingerprint)])
                .isEmpty
        }
    }

    public func markSeedSpent(_ fingerprint: String) async throws {
        try await withConnection { opened in
            _ = try opened.connection.query(
                "INSERT OR IGNORE INTO spent_seeds (fingerprint, spent_at) VALUES (?1, ?2)",
                [.text(fingerprint), .real(Date().timeIntervalSince1970)])
        }
    }

    public func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) async throws -> Int {
        try await ifOpen { opened in
            let connection = opened.connection
            let now = date.timeIntervalSince1970
            try connection.query(
                "DELETE FROM renewals WHERE id = ?1 AND at <= ?2", [.text(key.id), .real(now - window)])
            let count =
                try connection.query("SELECT count(*) FROM renewals WHERE id = ?1", [.text(key.id)]).first?
                .first?.integerValue ?? 0
            try connection.query("INSERT INTO renewals (id, at) VALUES (?1, ?2)", [.text(key.id), .real(now)])
            return Int(count)
        } ?? 0
    }

    public func clearUnexplainedRenewals(_ key: StoreKey) async throws {
        _ = try await ifOpen { opened in
            try opened.connection.query("DELETE FROM renewals WHERE id = ?1", [.text(key.id)])
        }
    }
}

// The JSON form is an extension so that the record keeps its memberwise initialiser.
extension SQLiteTokenStore.Payload {
    /// The record read from its JSON; `nil` when it is not an object, `tokenType` is not a
    /// string, or a member present (and not null) has the wrong type.
    init?(json bytes: [UInt8]) {
        guard case .object(let object)? = try? JSONParser.parse(bytes),
            case .string(let tokenType)? = object["tokenType"]
        else { return nil }
        /// `.some(nil)` for an absent or null member, `nil` for a wrong type.
        func string(_ key: String) -> String?? {
            switch object[key] {
            case nil, .null?: .some(nil)
            case .string(let text)?: .some(text)
            default: nil
            }
        }
        func double(_ key: String) -> Double?? {
            switch object[key] {
            case nil, .null?: .some(nil)
            case .number(let number)?: Double(number.literal).map { .some($0) }
            default: nil
            }
        }
        guard let accessToken = string("accessToken"), let refreshToken = string("refreshToken"),
            let scope = string("scope"), let receivedAt = double("receivedAt"), let expiresAt = double("expiresAt"),
            let subject = string("subject"), let dpopKey = string("dpopKey")
        else { return nil }
        self.init(
            accessToken: accessToken, tokenType: tokenType, receivedAt: receivedAt, expiresAt: expiresAt,
            refreshToken: refreshToken, scope: scope, subject: subject, dpopKey: dpopKey)
    }

    /// The record as JSON.
    var json: [UInt8] {
        var members: [(key: String, value: JSONValue)] = []
        if let accessToken { members.append(("accessToken", .string(accessToken))) }
        members.append(("tokenType", .string(tokenType)))
        if let receivedAt { members.append(("receivedAt", .number(JSONNumber(receivedAt)))) }
        if let expiresAt { members.append(("expiresAt", .number(JSONNumber(expiresAt)))) }
        if let refreshToken { members.append(("refreshToken", .string(refreshToken))) }
        if let scope { members.append(("scope", .string(scope))) }
        if let subject { members.append(("subject", .string(subject))) }
        if let dpopKey { members.append(("dpopKey", .string(dpopKey))) }
        return JSONValue.object(JSONObject(members)).serialized()
    }
}
