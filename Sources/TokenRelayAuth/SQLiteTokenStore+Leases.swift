import FoundationEssentials
import Glibc
import TokenRelayHTTPFields
import TokenRelayLogging

// Leases (SPEC §5.6): one renewal, and one login, per session across the processes sharing the
// store, each taken and released in a short `BEGIN IMMEDIATE` transaction writing only its row.

/// Who holds a lease, as the row names it: a pid and its start time mean something only in the
/// PID namespace, on the host, where they were read, so the row names those too.
struct LeaseHolder: Equatable, Sendable {
    var pid: Int64
    var start: Int64
    /// The host (its boot id and host name); `""` in a row of an earlier version.
    var host: String
    /// The PID namespace (`/proc/self/ns/pid`'s link, e.g. `pid:[4026531836]`); `""` in a row of
    /// an earlier version.
    var namespace: String

    /// This process (read from /proc on the first lease, not at start: a process that never
    /// renews never reads it).
    static let current: LeaseHolder = {
        let pid = getpid()
        return LeaseHolder(
            pid: Int64(pid), start: processStartTime(pid) ?? 0, host: hostIdentity(), namespace: pidNamespace())
    }()

    /// The boot id (a kernel, until it reboots) and the host name: two hosts sharing a store (an
    /// NFS home) differ in both; `""` parts when they cannot be read.
    static func hostIdentity() -> String {
        let bootID = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        var name = [CChar](repeating: 0, count: 256)
        var host = ""
        if gethostname(&name, name.count - 1) == 0 {
            host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return StoreKeyText.trimmed(bootID) + "/" + host
    }

    /// This process's PID namespace (`""` when it cannot be read).
    static func pidNamespace() -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        let count = readlink("/proc/self/ns/pid", &buffer, buffer.count - 1)
        guard count > 0 else { return "" }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `holder`'s lease, lasting until `expiresAt`, still binds `reader` at `now`.
    /// Past its expiry it never does. A holder in this PID namespace on this host is alive while
    /// its pid runs with the recorded start time (`startTime`), and is taken over at once when it
    /// is gone. A holder anywhere else (a container, a sandbox, another host) cannot be checked by
    /// pid from here (the pid may name another process, or none): its lease is waited for until
    /// it is released or lapses. A row of an earlier version (no identity) is judged by its pid.
    static func binds(
        _ holder: LeaseHolder, expiresAt: Double, now: Double, reader: LeaseHolder, startTime: (Int32) -> Int64?
    ) -> Bool {
        guard expiresAt > now else { return false }
        let recorded = !holder.host.isEmpty || !holder.namespace.isEmpty
        if recorded, holder.host != reader.host || holder.namespace != reader.namespace { return true }
        return startTime(Int32(truncatingIfNeeded: holder.pid)) == holder.start
    }
}

extension SQLiteTokenStore {
    /// The row of a session's lease. A login and a renewal lease the same session apart: a login
    /// waits for a person (up to `login_timeout`) and must not stop the session's renewals in
    /// every process for that long (a valid session keeps working while someone logs in again).
    /// The login takes the renewal lease too, only around its commit, so a renewal never commits
    /// over a login (a renewal waiting for it then re-reads the store and finds the login's tokens).
    /// A client registration (SPEC §9.4) has a row of its own: one registration per issuer.
    static func leaseRow(_ key: StoreKey, _ purpose: LeasePurpose) -> String {
        switch purpose {
        case .renewal: key.id
        case .login: "login:" + key.id
        case .registration: "registration:" + key.id
        }
    }

    public func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    {
        try await open()
        let owner = try await waitForLease(
            Self.leaseRow(key, purpose), purpose: purpose, what: "\(key)", deadline: deadline, expiresAt: expiresAt
        ) { _ in log.debug("the lease of \(key) is held elsewhere; waiting (\(purpose.rawValue))") }
        log.debug("lease taken for \(key) (\(purpose.rawValue))")
        return StoreLease(key: key, owner: owner, purpose: purpose)
    }

    /// Takes the lease row `row` for a new owner (returned), waiting for a live holder until
    /// `deadline` without spinning (``LeaseWait``; `AuthError.timeout` past it); `firstWait` is
    /// told the holder's pid the first time it waits.
    private func waitForLease(
        _ row: String, purpose: LeasePurpose, what: String, deadline: Date, expiresAt: Date,
        firstWait: (Int64) -> Void
    ) async throws -> Int64 {
        let owner = Int64.random(in: 1...Int64.max)
        var delay = 0.005
        var waited = false
        while true {
            try Task.checkCancellation()
            guard
                let holder = try await onQueue({
                    try self.tryTakeLease(row, owner: owner, purpose: purpose, expiresAt: expiresAt, what: what)
                })
            else { return owner }
            if !waited {
                waited = true
                firstWait(holder)
            }
            try await LeaseWait.pause(&delay, deadline: deadline)
        }
    }

    /// One short `BEGIN IMMEDIATE` transaction writing only the lease's row `row`: takes it when
    /// free, expired, or held by a process that is gone
    /// (``LeaseHolder/binds(_:expiresAt:now:reader:startTime:)``). Returns `nil` when taken, else
    /// the pid of the live holder.
    func tryTakeLease(_ row: String, owner: Int64, purpose: LeasePurpose, expiresAt: Date, what: String) throws
        -> Int64?
    {
        let me = LeaseHolder.current
        return try withOpened { opened -> Int64? in
            let connection = opened.connection
            try connection.execute("BEGIN IMMEDIATE")
            do {
                let found = try connection.query(
                    "SELECT holder_pid, holder_start, expires_at, holder_host, holder_namespace FROM leases WHERE id = ?1",
                    [.text(row)]
                ).first
                if let found, let pid = found[0].integerValue {
                    let holder = LeaseHolder(
                        pid: pid, start: found[1].integerValue ?? 0, host: found[3].textValue ?? "",
                        namespace: found[4].textValue ?? "")
                    if LeaseHolder.binds(
                        holder, expiresAt: found[2].realValue ?? 0, now: Date().timeIntervalSince1970, reader: me,
                        startTime: processStartTime)
                    {
                        try connection.execute("COMMIT")
                        return pid
                    }
                    log.info("taking over the lease of \(what) from process \(pid) (gone or expired)")
                }
                try connection.query(
                    """
                    INSERT OR REPLACE INTO leases
                        (id, holder_pid, holder_start, owner, purpose, expires_at, holder_host, holder_namespace)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                    """,
                    [
                        .text(row), .integer(me.pid), .integer(me.start), .integer(owner), .text(purpose.rawValue),
                        .real(expiresAt.timeIntervalSince1970), .text(me.host), .text(me.namespace),
                    ])
                try connection.execute("COMMIT")
                return nil
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        } ?? nil
    }

    /// `store rekey` (SPEC §5.6): takes the renewal lease of every session in the store, and every
    /// renewal or registration lease held now (a session's first renewal, a registration under
    /// way), waiting for live holders until `deadline` (`waiting` is told once per lease it waits
    /// for). While they are held no process sends a refresh token or commits a rotation or a
    /// registration, so one rotated during the rekey is committed under the old key first and
    /// re-sealed with the rest. Returns the rows taken (row -> owner) for
    /// ``releaseLeaseRows(_:what:)``; on a failure none is kept.
    func takeEveryRenewalLease(until deadline: Date, waiting: @Sendable (String) -> Void) async throws
        -> [String: Int64]
    {
        let rows: [(row: String, purpose: LeasePurpose, what: String)] =
            try await onQueue {
                try self.withOpened { opened in
                    var rows: [(row: String, purpose: LeasePurpose, what: String)] = []
                    var seen = Set<String>()
                    for row in try opened.connection.query("SELECT id, environment, profile FROM sessions") {
                        guard let id = row[0].textValue, seen.insert(id).inserted else { continue }
                        rows.append((id, .renewal, "\(row[1].textValue ?? "?")/\(row[2].textValue ?? "?")"))
                    }
                    for row in try opened.connection.query("SELECT id, purpose FROM leases") {
                        guard let id = row[0].textValue, let purpose = row[1].textValue.flatMap(LeasePurpose.init),
                            purpose != .login, seen.insert(id).inserted
                        else { continue }
                        rows.append((id, purpose, purpose == .registration ? "a client registration" : "a new session"))
                    }
                    return rows
                } ?? []
            }
        let expiresAt = deadline.addingTimeInterval(60)
        var taken: [String: Int64] = [:]
        do {
            for (row, purpose, what) in rows {
                var holder: Int64 = 0
                let owner: Int64
                do {
                    owner = try await waitForLease(
                        row, purpose: purpose, what: what, deadline: deadline, expiresAt: expiresAt
                    ) { pid in
                        holder = pid
                        waiting("waiting for the renewal of \(what) in process \(pid) to end")
                    }
                } catch AuthError.timeout {
                    throw AuthError.store(
                        "the store \(path) was not re-keyed: the renewal of \(what) in process \(holder) did not "
                            + "end in time; nothing was changed. Run the rekey again when it has ended")
                }
                taken[row] = owner
            }
        } catch {
            releaseLeaseRows(taken, what: "the rekey")
            throw error
        }
        return taken
    }

    /// Queued without waiting: the store's queue runs it before any later statement of this
    /// process.
    public func releaseLease(_ lease: StoreLease) {
        releaseLeaseRows([Self.leaseRow(lease.key, lease.purpose): lease.owner], what: "\(lease.key)")
    }

    /// Deletes the lease rows `rows` (row -> owner) this process holds, queued without waiting.
    func releaseLeaseRows(_ rows: [String: Int64], what: String) {
        guard !rows.isEmpty else { return }
        queue.async {
            do {
                _ = try self.withOpened { opened in
                    for (row, owner) in rows {
                        try opened.connection.query(
                            "DELETE FROM leases WHERE id = ?1 AND owner = ?2", [.text(row), .integer(owner)])
                    }
                }
            } catch {
                log.warn("the lease of \(what) could not be released (it lapses by itself): \(error)")
            }
        }
    }
}
