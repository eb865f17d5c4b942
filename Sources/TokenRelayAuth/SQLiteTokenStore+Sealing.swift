import FoundationEssentials
import TokenRelayHTTPFields

// Sealing at rest (SPEC §5.6): the check record, the records, and `store rekey`.
//
// What decides whether a store is sealed is its check record, which only the key can make: a
// process with a key opens every record under it, whatever the record's `sealed` column says
// (anyone who can write the file can change that column, but cannot seal a record). A store
// without a check record is sealed for the first time only while it holds no session record: a
// key never adopts unsealed records (they may have been planted, with the check record deleted).
// A plain store is sealed on purpose, by `tokenrelay store rekey` run without a key.

extension SQLiteTokenStore {
    /// The check record's plaintext and associated data: a key that opens it is the store's key.
    static let checkPlaintext = Array("tokenrelay store check v1".utf8)
    static let checkAssociatedData = Array("tokenrelay-store-check".utf8)

    /// The check record as stored, if any.
    static func checkRecord(_ connection: SQLiteConnection) throws(SQLiteError) -> [UInt8]? {
        try connection.query("SELECT value FROM meta WHERE name = 'check'").first?.first?.blobValue
    }

    /// With a key: verifies the check record (or writes it, for a store that holds no record yet)
    /// and returns it. Without: refuses a sealed store.
    func checkKey(_ connection: SQLiteConnection, cipher: StoreCipher?) throws(AuthError) -> [UInt8]? {
        do {
            let check = try Self.checkRecord(connection)
            guard let cipher else {
                let sealedRows =
                    try connection.query("SELECT count(*) FROM sessions WHERE sealed = 1").first?.first?
                    .integerValue ?? 0
                if try Self.keyKind(connection) == .secretService {
                    throw AuthError.store(
                        "the store \(path) was sealed with a key from the secret service; remove store.key: none "
                            + "to open it with that key")
                }
                if check != nil || sealedRows > 0 {
                    throw AuthError.store("the store \(path) is encrypted; configure store.encryption_key to open it")
                }
                return nil
            }
            if let check {
                if try Self.keyKind(connection) == .secretService,
                    cipher.open(check, associatedData: Self.checkAssociatedData) != Self.checkPlaintext
                {
                    throw AuthError.store(
                        "the store \(path) was sealed with a key from the secret service, not with "
                            + "store.encryption_key: remove store.encryption_key to open it with that key "
                            + "(nothing was read or written)")
                }
                try verifyCheck(check, cipher: cipher)
                return check
            }
            return try sealNewStore(connection, cipher: cipher)
        } catch let error as AuthError {
            throw error
        } catch {
            throw AuthError.store("the store \(path) could not be read (\(error))")
        }
    }

    /// A store without a check record opened with a key: decided under the write lock (another
    /// process opening the same new store may have written its check record meanwhile). Writes
    /// the check record when the store holds no session record; refuses one that holds some.
    private func sealNewStore(_ connection: SQLiteConnection, cipher: StoreCipher) throws -> [UInt8] {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            if let check = try Self.checkRecord(connection) {
                try connection.execute("COMMIT")
                try verifyCheck(check, cipher: cipher)
                return check
            }
            let rows = try connection.query("SELECT count(*) FROM sessions").first?.first?.integerValue ?? 0
            guard rows == 0 else {
                throw AuthError.store(
                    "the store \(path) holds \(rows) session record(s) but no check record: it was written "
                        + "without a key, or its check record was removed. A key never adopts unsealed records: "
                        + "to seal a plain store you trust, run `tokenrelay store rekey --new-key-env NAME` with "
                        + "store.encryption_key unset; otherwise move the file away to start afresh")
            }
            let check = try Self.writeCheck(connection, cipher: cipher, kind: .configured)
            try connection.execute("COMMIT")
            return check
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Throws unless `cipher` opens the check record `check` (the key is the store's).
    func verifyCheck(_ check: [UInt8], cipher: StoreCipher) throws(AuthError) {
        guard cipher.open(check, associatedData: Self.checkAssociatedData) == Self.checkPlaintext else {
            throw AuthError.store(
                "the encryption key does not open the store \(path) (wrong key?, or the store was re-keyed "
                    + "with `tokenrelay store rekey`: then set store.encryption_key to the new key)")
        }
    }

    /// Throws unless the store is still sealed as this process opened it: the same check record,
    /// or one its key opens. Run in every write transaction before a record is sealed, and when a
    /// record does not open: a `store rekey` elsewhere is then told apart from a tampered record.
    func checkKeyIsCurrent(_ opened: inout Opened) throws {
        let stored = try Self.checkRecord(opened.connection)
        guard let cipher = opened.cipher else {
            if stored != nil {
                throw AuthError.store(
                    "the store \(path) was sealed under a key (tokenrelay store rekey) since this process opened "
                        + "it: nothing was read or written; set store.encryption_key to that key and restart tokenrelay"
                )
            }
            return
        }
        if let stored, stored == opened.checkRecord { return }
        guard let stored else {
            throw AuthError.store(
                "the check record of the store \(path) was removed since this process opened it (tampered?); "
                    + "nothing was read or written")
        }
        if cipher.open(stored, associatedData: Self.checkAssociatedData) == Self.checkPlaintext {
            opened.checkRecord = stored  // re-sealed under this same key
            return
        }
        throw AuthError.store(
            "the store \(path) was re-keyed (tokenrelay store rekey) since this process opened it: its records are "
                + "sealed under a key this process does not hold, and nothing was read or written. Set "
                + "store.encryption_key to the new key and restart tokenrelay")
    }

    /// A record's plaintext. With a key, it must open under that key whatever its `sealed` column
    /// says; a record that does not is refused (nothing of it is used), as re-keyed when the check
    /// record says so, as tampered otherwise. Without a key, a record marked sealed is refused.
    func openRecord(_ payload: [UInt8], markedSealed: Bool, id: String, key: StoreKey, opened: inout Opened) throws
        -> [UInt8]
    {
        guard let cipher = opened.cipher else {
            if markedSealed {
                throw AuthError.store("the store \(path) is encrypted; configure store.encryption_key to open it")
            }
            return payload
        }
        if let plain = cipher.open(payload, associatedData: Array(id.utf8)) { return plain }
        try checkKeyIsCurrent(&opened)
        throw AuthError.storage(
            "the record of \(key) in the store \(path) does not open under the store's key (tampered or corrupted); "
                + "nothing of it was used. If the file was changed by someone else, log out of the session "
                + "to remove the record")
    }

    func seal(_ plain: [UInt8], id: String, cipher: StoreCipher?) throws(AuthError) -> ([UInt8], Bool) {
        guard let cipher else { return (plain, false) }
        guard let sealed = cipher.seal(plain, associatedData: Array(id.utf8)) else {
            throw AuthError.storage("sealing failed (libcrypto)")
        }
        return (sealed, true)
    }

    /// In one transaction (holding the write lock throughout, so that no commit of another process
    /// interleaves): checks the store is still as `opened` knows it, opens every record with its
    /// key (a plain store: every record is plain), seals it with `new`, and writes the check
    /// record of `new`. Returns that check record.
    private func reseal(_ opened: inout Opened, to new: StoreCipher, kind: StoreKeyKind) throws -> [UInt8] {
        let connection = opened.connection
        try connection.execute("BEGIN IMMEDIATE")
        do {
            try checkKeyIsCurrent(&opened)
            for row in try connection.query("SELECT id, payload, sealed FROM sessions") {
                guard let id = row[0].textValue, let payload = row[1].blobValue else { continue }
                let plain: [UInt8]
                if let old = opened.cipher {
                    guard let record = old.open(payload, associatedData: Array(id.utf8)) else {
                        throw AuthError.store(
                            "a record of the store \(path) does not open under its key (tampered?); nothing was changed"
                        )
                    }
                    plain = record
                } else {
                    guard row[2].integerValue != 1 else {
                        throw AuthError.store("the store \(path) holds sealed records but no check record (tampered?)")
                    }
                    plain = payload
                }
                let (stored, _) = try seal(plain, id: id, cipher: new)
                try connection.query(
                    "UPDATE sessions SET payload = ?1, sealed = 1 WHERE id = ?2", [.blob(stored), .text(id)])
            }
            // Client registrations (SPEC §9.4) are sealed like sessions, under their own ids.
            for row in try connection.query("SELECT issuer, payload, sealed FROM registrations") {
                guard let issuer = row[0].textValue, let payload = row[1].blobValue else { continue }
                let id = Self.sealingID(issuer)
                let plain: [UInt8]
                if let old = opened.cipher {
                    guard let record = old.open(payload, associatedData: Array(id.utf8)) else {
                        throw AuthError.store(
                            "a client registration of the store \(path) does not open under its key (tampered?); "
                                + "nothing was changed")
                    }
                    plain = record
                } else {
                    guard row[2].integerValue != 1 else {
                        throw AuthError.store("the store \(path) holds sealed records but no check record (tampered?)")
                    }
                    plain = payload
                }
                let (stored, _) = try seal(plain, id: id, cipher: new)
                try connection.query(
                    "UPDATE registrations SET payload = ?1, sealed = 1 WHERE issuer = ?2",
                    [.blob(stored), .text(issuer)])
            }
            let check = try Self.writeCheck(connection, cipher: new, kind: kind)
            try connection.execute("COMMIT")
            // The write-ahead log still holds the pages as they were (old key, or plain text): copy
            // them into the file (whose freed pages `secure_delete` zeroes) and empty the log.
            // Best effort: a reader in another process may keep the log from being truncated now.
            try? connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return check
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// `tokenrelay store rekey`: re-seals every record under `newKey` (base64 or hex) in one
    /// transaction (``rekey(to:leaseWait:waiting:)-(NewStoreKey,_,_)``).
    @discardableResult
    public func rekey(
        to newKey: String, leaseWait: Duration = .seconds(30), waiting: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> [String] {
        try await rekey(to: .text(newKey), leaseWait: leaseWait, waiting: waiting)
    }

    /// `tokenrelay store rekey`: re-seals every record under `newKey` in one transaction. The
    /// store must open with its current key first (none: a plain store, sealed now on purpose).
    /// Every session's renewal lease is taken first (SPEC §5.6), waiting up to `leaseWait` for
    /// renewals under way elsewhere (`waiting` says which), so no rotated refresh token is
    /// committed under the old key after the re-sealing, nor sent meanwhile. A key for the
    /// secret service is created there just before the re-sealing; the secret service's item of
    /// a store moved away from it is removed just after. Returns what else it did, in sentences.
    @discardableResult
    public func rekey(
        to newKey: NewStoreKey, leaseWait: Duration = .seconds(30),
        waiting: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> [String] {
        if case .text(let text) = newKey, Self.decodeKey(text) == nil {
            throw AuthError.store("the new key \(StoreKeyText.requirement)")
        }
        try await open()
        let deadline = Date().addingTimeInterval(Double(leaseWait.components.seconds))
        let leases = try await takeEveryRenewalLease(until: deadline, waiting: waiting)
        defer { releaseLeaseRows(leases, what: "the rekey") }
        return try await onQueue {
            let result = self.state.withLock { opened -> Result<[String], AuthError> in
                guard var current = opened else { return .success([]) }
                let previous = current.keyKind
                do {
                    let (cipher, kind) = try self.rekeyTarget(newKey, current: previous)
                    let check = try self.reseal(&current, to: cipher, kind: kind)
                    current.cipher = cipher
                    current.checkRecord = check
                    current.keyKind = kind
                    current.note = kind == .secretService ? Self.sealedBySecretService : Self.sealedByConfiguredKey
                    opened = current
                } catch let error as AuthError {
                    return .failure(error)
                } catch {
                    return .failure(
                        AuthError.store("the store \(self.path) could not be re-sealed (\(error)); nothing was changed")
                    )
                }
                self.publishInfo(current)
                guard previous == .secretService, current.keyKind != .secretService else { return .success([]) }
                // The secret service's key seals nothing any more.
                switch SecretServiceKeyring.delete(store: self.path) {
                case .done, .absent:
                    return .success(["the secret service's key for the store was removed"])
                default:
                    return .success([
                        "the secret service's key for the store could not be removed: remove it with `secret-tool "
                            + "clear application \(SecretServiceKeyring.application) store \(self.path)`"
                    ])
                }
            }
            return try result.get()
        }
    }
}
