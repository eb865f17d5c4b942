import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayLogging
import TokenRelayPlatform

/// How to reach a PostgreSQL shared tier (`store.shared`).
public struct PostgresTierConfiguration: Sendable {
    /// A libpq connection URL (`postgresql://user@host/db?sslmode=verify-full`).
    public var url: String
    /// The password, when not in the URL or libpq's own sources (`PGPASSWORD`, `~/.pgpass`).
    public var password: SecretProvider?
    /// The bound of every call (connect, statement, answer).
    public var timeout: Duration
    /// The schema holding the tier's tables (a plain lower-case identifier).
    public var schema: String

    /// Creates a configuration.
    public init(
        url: String, password: SecretProvider? = nil, timeout: Duration = .seconds(2), schema: String = "tokenrelay"
    ) {
        self.url = url
        self.password = password
        self.timeout = timeout
        self.schema = schema
    }
}

/// The shared tier on PostgreSQL through libpq (SPEC §11).
///
/// Every libpq call blocks, so none runs on the cooperative pool: row reads and writes run on the
/// tier's own ``SerialThread`` over one connection; each renewal lock gets a connection (and
/// thread) of its own, on which `pg_advisory_lock` waits in the server (the lock is released when
/// the holder unlocks or its connection drops, e.g. because it died); one listener thread waits in
/// `poll` on a `LISTEN` connection for the fleet's changes. A caller waits at most `timeout` for any
/// call (a renewal lock: until its deadline): the call may go on on its thread, and its
/// connection is dropped when it ends. While the tier fails, callers skip it for a second at a
/// time and the host acts on its own; a warning is logged at most once a minute.
public final class PostgresSharedTier: SharedTokenTier {
    /// The schema version this build creates and reads.
    static let schemaVersion = 1
    /// How long a failed tier is skipped before it is tried again.
    static let retryInterval: TimeInterval = 1
    /// How often a failing tier is warned about.
    static let warningInterval: TimeInterval = 60

    private let configuration: PostgresTierConfiguration
    private let commands = SerialThread(named: "relay-pg")
    private let state = PostgresTierState()
    private let quoted: String
    private let channel: String

    /// A tier reached with `configuration` (nothing is connected before first use).
    public init(configuration: PostgresTierConfiguration) {
        self.configuration = configuration
        quoted = "\"\(configuration.schema)\""
        channel = "tokenrelay_\(configuration.schema)"
    }

    public var info: SharedTierInfo {
        let since = state.health.withLock { $0.unavailableSince }
        return SharedTierInfo(type: "postgres", state: since == nil ? "available" : "unavailable", since: since)
    }

    public func changedElsewhere() -> Bool { state.changed.exchange(false, ordering: .acquiringAndReleasing) }

    // MARK: - Rows

    public func read(_ id: [UInt8]) async throws -> SharedRow? {
        let table = "\(quoted).tokens"
        let rows = try await perform { connection in
            try connection.query(
                "SELECT encode(sealed, 'hex'), extract(epoch FROM expires_at)::float8 FROM \(table) WHERE id = decode($1, 'hex')",
                [StoreKey.hex(id)])
        }
        guard let row = rows.first, row.count == 2, let sealedHex = row[0], let sealed = Self.bytes(hex: sealedHex)
        else { return nil }
        return SharedRow(
            id: id, sealed: sealed, expiresAt: row[1].flatMap(Double.init).map(Date.init(timeIntervalSince1970:)))
    }

    public func publish(_ row: SharedRow) async throws {
        let table = "\(quoted).tokens"
        let expiry = row.expiresAt.map { String($0.timeIntervalSince1970) }
        _ = try await perform { connection in
            try connection.query(
                """
                WITH stored AS (
                  INSERT INTO \(table) (id, sealed, expires_at, updated_at)
                  VALUES (decode($1, 'hex'), decode($2, 'hex'), to_timestamp($3::float8), now())
                  ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at, updated_at = now()
                  WHERE \(table).expires_at IS NULL OR excluded.expires_at IS NULL OR excluded.expires_at >= \(table).expires_at
                  RETURNING 1)
                SELECT pg_notify($4, '') FROM stored
                """,
                [StoreKey.hex(row.id), StoreKey.hex(row.sealed), expiry, self.channel])
        }
    }

    public func delete(_ id: [UInt8], ifSealed sealed: [UInt8]) async throws -> Bool {
        let table = "\(quoted).tokens"
        let rows = try await perform { connection in
            try connection.query(
                """
                WITH gone AS (DELETE FROM \(table) WHERE id = decode($1, 'hex') AND sealed = decode($2, 'hex') RETURNING 1)
                SELECT pg_notify($3, '') FROM gone
                """,
                [StoreKey.hex(id), StoreKey.hex(sealed), self.channel])
        }
        return !rows.isEmpty
    }

    public func delete(_ id: [UInt8]) async throws {
        let table = "\(quoted).tokens"
        _ = try await perform { connection in
            try connection.query(
                "WITH gone AS (DELETE FROM \(table) WHERE id = decode($1, 'hex') RETURNING 1) SELECT pg_notify($2, '') FROM gone",
                [StoreKey.hex(id), self.channel])
        }
    }

    // MARK: - Renewal locks

    public func lock(_ id: [UInt8], deadline: Date) async throws -> (any SharedRenewalLock)? {
        let parameters = try await usableParameters()
        let wait = max(0, deadline.timeIntervalSinceNow)
        let waitMilliseconds = String(max(1, Int(wait * 1000)))
        let key = String(Self.lockKey(id))
        let holder = PostgresRenewalLock()
        let outcome: Result<Bool, PostgresError>? = await Self.bounded(
            seconds: wait + configuration.timeout.timeInterval, on: holder.thread,
            abandon: { holder.release() }
        ) {
            do {
                let connection = try PostgresConnection(parameters: parameters)
                try connection.query(
                    "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $1, false)",
                    [waitMilliseconds])
                do {
                    try connection.query("SELECT pg_advisory_lock($1::bigint)", [key])
                } catch let error as PostgresError where error.sqlState == "55P03" || error.sqlState == "57014" {
                    return .success(false)
                }
                holder.hold(connection)
                return .success(true)
            } catch {
                return .failure(PostgresError.from(error))
            }
        }
        switch outcome {
        case .success(true):
            markAvailable()
            return holder
        case .success(false):
            markAvailable()
            holder.release()
            return nil
        case .failure(let error):
            holder.release()
            throw markUnavailable(error.description)
        case nil:
            throw markUnavailable("no answer within \(configuration.timeout) to a renewal lock")
        }
    }

    // MARK: - Calls

    /// Runs `work` on the command connection (opened, and its schema checked, first when needed),
    /// bounded by the timeout. Any failure drops the connection and marks the tier unavailable.
    private func perform<T: Sendable>(_ work: @escaping @Sendable (PostgresConnection) throws -> T)
        async throws -> T
    {
        let parameters = try await usableParameters()
        let state = self.state
        let schemaWork = ensureSchema
        let outcome: Result<T, PostgresError>? = await Self.bounded(
            seconds: configuration.timeout.timeInterval, on: commands,
            abandon: { [commands] in commands.async { state.connection.withLock { $0 = nil } } }
        ) {
            do {
                let opened: PostgresConnection
                if let existing = state.connection.withLock({ $0 }) {
                    opened = existing
                } else {
                    opened = try PostgresConnection(parameters: parameters)
                    try schemaWork(opened)
                    state.connection.withLock { $0 = opened }
                }
                return .success(try work(opened))
            } catch {
                state.connection.withLock { $0 = nil }
                return .failure(PostgresError.from(error))
            }
        }
        switch outcome {
        case .success(let value):
            markAvailable()
            return value
        case .failure(let error): throw markUnavailable(error.description)
        case nil: throw markUnavailable("no answer within \(configuration.timeout)")
        }
    }

    /// The connection parameters (the password resolved once), or ``SharedTierUnavailable`` while
    /// a failed tier is skipped.
    private func usableParameters() async throws -> [(String, String)] {
        let now = Date()
        let (skip, known) = state.health.withLock { health -> (Bool, [(String, String)]?) in
            if health.unavailableSince != nil, let last = health.lastAttempt,
                now.timeIntervalSince(last) < Self.retryInterval
            {
                return (true, nil)
            }
            health.lastAttempt = now
            return (false, health.parameters)
        }
        if skip { throw SharedTierUnavailable("skipped while it fails") }
        if let known { return known }
        var password: String?
        if let provider = configuration.password {
            do {
                password = try await provider.resolve()
            } catch {
                throw markUnavailable("its password could not be resolved")
            }
        }
        let milliseconds = max(1, Int(configuration.timeout.timeInterval * 1000))
        var parameters: [(String, String)] = [
            ("dbname", configuration.url),
            ("connect_timeout", String(max(2, Int(configuration.timeout.timeInterval.rounded(.up))))),
            ("options", "-c statement_timeout=\(milliseconds)"),
            ("tcp_user_timeout", String(milliseconds)),
            ("application_name", "tokenrelay"),
        ]
        if let password { parameters.append(("password", password)) }
        state.health.withLock { $0.parameters = parameters }
        return parameters
    }

    /// Creates the schema on first use (one transaction with a version row, serialised across the
    /// fleet by a transaction lock); refuses a newer one without touching it.
    private func ensureSchema(_ connection: PostgresConnection) throws {
        let schema = configuration.schema
        try connection.query("BEGIN")
        do {
            try connection.query("SELECT pg_advisory_xact_lock(1953653362, 1)")
            let exists = try connection.query("SELECT to_regclass($1) IS NOT NULL", ["\(quoted).schema_version"])
            if exists.first?.first == "t" {
                let rows = try connection.query("SELECT max(version) FROM \(quoted).schema_version")
                let version = rows.first?.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
                guard version <= Self.schemaVersion else {
                    throw PostgresError(
                        sqlState: nil,
                        message:
                            "the schema '\(schema)' is at version \(version), newer than this tokenrelay knows (\(Self.schemaVersion)); it is left alone"
                    )
                }
            } else {
                let namespace = try connection.query("SELECT to_regnamespace($1) IS NOT NULL", [quoted])
                if namespace.first?.first != "t" { try connection.query("CREATE SCHEMA \(quoted)") }
                try connection.query("CREATE TABLE \(quoted).schema_version (version integer NOT NULL)")
                try connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS \(quoted).tokens (
                      id bytea PRIMARY KEY, sealed bytea NOT NULL, expires_at timestamptz,
                      updated_at timestamptz NOT NULL DEFAULT now())
                    """)
                try connection.query(
                    "INSERT INTO \(quoted).schema_version (version) VALUES ($1::integer)", [String(Self.schemaVersion)])
            }
            try connection.query("COMMIT")
        } catch {
            _ = try? connection.query("ROLLBACK")
            throw error
        }
    }

    // MARK: - Health

    private func markAvailable() {
        state.rejoined()
        let startListener = state.health.withLock { health -> Bool in
            let start = !health.listening && health.parameters != nil
            if start { health.listening = true }
            return start
        }
        if startListener { startListening() }
    }

    private func markUnavailable(_ reason: String) -> SharedTierUnavailable {
        let now = Date()
        let warn = state.health.withLock { health -> Bool in
            if health.unavailableSince == nil { health.unavailableSince = now }
            health.lastAttempt = now
            if let last = health.lastWarning, now.timeIntervalSince(last) < Self.warningInterval { return false }
            health.lastWarning = now
            return true
        }
        if warn { log.warn("the shared tier is unavailable (acting alone until it answers): \(reason)") }
        return SharedTierUnavailable(reason)
    }

    /// The listener: a connection that `LISTEN`s on the tier's channel, waiting in `poll`; every
    /// notification (and every reconnection, which may have missed some) marks the tier changed.
    /// Reconnects after a failure, waiting a growing interval (0.2 s to 2 s) on its own thread.
    private func startListening() {
        let channel = self.channel
        let state = self.state
        SystemThread.start(named: "relay-pg-listen") {
            var pause: UInt32 = 200_000
            while true {
                guard let parameters = state.health.withLock({ $0.parameters }) else { return }
                if let connection = try? PostgresConnection(parameters: parameters),
                    (try? connection.query("LISTEN \"\(channel)\"")) != nil
                {
                    pause = 200_000
                    // The tier answers: the host rejoins at once, without waiting for a request to
                    // find out, and re-reads its sessions (notifications may have been missed).
                    state.rejoined()
                    state.changed.store(true, ordering: .releasing)
                    while let channels = try? connection.waitForNotifications(timeoutMilliseconds: -1) {
                        if !channels.isEmpty { state.changed.store(true, ordering: .releasing) }
                    }
                }
                usleep(pause)
                pause = min(pause * 2, 2_000_000)
            }
        }
    }

    // MARK: - Helpers

    /// Runs `job` on `thread` and returns its result, or `nil` when `seconds` passed first (then
    /// `abandon` runs once the job ends, so that what it opened is dropped).
    private static func bounded<T: Sendable>(
        seconds: TimeInterval, on thread: SerialThread, abandon: @escaping @Sendable () -> Void,
        _ job: @escaping @Sendable () -> T
    ) async -> T? {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let once = OnceContinuation(continuation)
            let timer = Placement.task {
                // Cancelled: the job answered first.
                guard (try? await Task.sleep(for: .seconds(max(0.001, seconds)))) != nil else { return }
                once.resume(nil)
            }
            thread.async {
                let value = job()
                let answered = once.resume(value)
                timer.cancel()
                if !answered { abandon() }
            }
        }
    }

    /// The advisory-lock key of a row: the first 8 bytes of its id.
    static func lockKey(_ id: [UInt8]) -> Int64 {
        var value: UInt64 = 0
        for byte in id.prefix(8) { value = value << 8 | UInt64(byte) }
        return Int64(bitPattern: value)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// What the tier's threads share with it.
final class PostgresTierState: Sendable {
    struct Health {
        var unavailableSince: Date?
        var lastAttempt: Date?
        var lastWarning: Date?
        var parameters: [(String, String)]?
        var listening = false
    }

    /// The command connection. Only touched from the tier's command thread.
    let connection = Mutex<PostgresConnection?>(nil)
    let health = Mutex(Health())
    /// Set by the listener when the fleet changed a row; taken by `changedElsewhere`.
    let changed = Atomic<Bool>(false)

    /// The tier answered: available again (said once, and every session is re-read).
    func rejoined() {
        let was = health.withLock { health -> Bool in
            defer { health.unavailableSince = nil }
            return health.unavailableSince != nil
        }
        guard was else { return }
        log.info("the shared tier answers again; sharing tokens with the fleet")
        changed.store(true, ordering: .releasing)
    }
}

/// A renewal lock held on a connection of its own; releasing it closes that connection (on the
/// lock's thread), which releases the lock in the server.
final class PostgresRenewalLock: SharedRenewalLock {
    let thread = SerialThread(named: "relay-pg-lock")
    /// Only touched from `thread`.
    private let box = ConnectionBox()

    func hold(_ held: PostgresConnection) { box.connection.withLock { $0 = held } }

    func release() {
        let box = self.box
        thread.async { box.connection.withLock { $0 = nil } }
    }

    private final class ConnectionBox: Sendable {
        let connection = Mutex<PostgresConnection?>(nil)
    }
}

/// A continuation resumed by the first of several parties (a job or its timer).
final class OnceContinuation<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) { self.continuation = Mutex(continuation) }

    /// Resumes with `value` if nobody did yet; returns whether this call did.
    @discardableResult
    func resume(_ value: T) -> Bool {
        guard let continuation = continuation.withLock({ $0.take() }) else { return false }
        continuation.resume(returning: value)
        return true
    }
}
