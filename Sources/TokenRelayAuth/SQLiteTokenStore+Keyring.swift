import FoundationEssentials
import TokenRelayHTTPFields
import TokenRelayLogging

// Where the store's key comes from (SPEC §5.6): a configured secret source, the desktop's secret
// service (the default when none is configured), or nowhere (plain text).
//
// A store records in its meta table which kind of key sealed it (`key`: `encryption_key` or
// `secret_service`; a store sealed before that row existed was sealed with a configured key), so a
// store sealed with the secret service's key is never opened or rewritten without it, and the
// error says where the key was expected.

/// Where a store's key comes from.
public enum StoreKeySource: Sendable {
    /// No key: tokens in plain text (`store.key: none`).
    case none
    /// A configured key (`store.encryption_key`, `store.key: {env | file | command}`): base64 or
    /// hex of 32 bytes.
    case configured(SecretProvider)
    /// The secret service's key for this store, created on first use. `required` (`store.key:
    /// keyring`): a store that cannot have it is refused; otherwise (no key configured) a new
    /// store where there is no secret service stays plain, and says so.
    case secretService(required: Bool)
}

/// What sealed a store, as its meta table records it.
public enum StoreKeyKind: String, Sendable {
    case configured = "encryption_key"
    case secretService = "secret_service"
}

/// `store rekey`'s new key.
public enum NewStoreKey: Sendable {
    /// A key's text (base64 or hex of 32 bytes).
    case text(String)
    /// A new random key, kept by the secret service.
    case secretService
}

extension SQLiteTokenStore {
    /// The key as `open` found it, before the store is read.
    enum KeyPlan: Sendable {
        case plain
        case configured(StoreCipher)
        case secretService(required: Bool)
    }

    /// How an opened store is sealed.
    struct Sealing {
        var cipher: StoreCipher?
        var check: [UInt8]?
        var kind: StoreKeyKind?
        var note: String
    }

    static let sealedBySecretService = "sealed with a key from the secret service"
    static let sealedByConfiguredKey = "sealed with store.encryption_key"

    /// What sealed the store, from its meta table (`configured` for a sealed store of a version
    /// that did not record it).
    static func keyKind(_ connection: SQLiteConnection) throws(SQLiteError) -> StoreKeyKind? {
        guard try checkRecord(connection) != nil else { return nil }
        let value = try connection.query("SELECT value FROM meta WHERE name = 'key'").first?.first?.blobValue
        return value.flatMap { StoreKeyKind(rawValue: String(decoding: $0, as: UTF8.self)) } ?? .configured
    }

    /// Writes the check record of `cipher` and what kind of key it is, in the caller's transaction.
    static func writeCheck(_ connection: SQLiteConnection, cipher: StoreCipher, kind: StoreKeyKind) throws
        -> [UInt8]
    {
        guard let check = cipher.seal(checkPlaintext, associatedData: checkAssociatedData) else {
            throw AuthError.store("sealing failed (libcrypto)")
        }
        try connection.query("INSERT OR REPLACE INTO meta (name, value) VALUES ('check', ?1)", [.blob(check)])
        try connection.query(
            "INSERT OR REPLACE INTO meta (name, value) VALUES ('key', ?1)", [.blob(Array(kind.rawValue.utf8))])
        return check
    }

    /// Decides how the freshly opened store is sealed.
    func sealing(_ connection: SQLiteConnection, _ plan: KeyPlan) throws(AuthError) -> Sealing {
        switch plan {
        case .plain:
            _ = try checkKey(connection, cipher: nil)
            return Sealing(note: "plain text (store.key: none)")
        case .configured(let cipher):
            let check = try checkKey(connection, cipher: cipher)
            return Sealing(cipher: cipher, check: check, kind: .configured, note: Self.sealedByConfiguredKey)
        case .secretService(let required):
            do {
                return try secretServiceSealing(connection, required: required)
            } catch let error as AuthError {
                throw error
            } catch {
                throw AuthError.store("the store \(path) could not be read (\(error))")
            }
        }
    }

    /// The store with the secret service's key: a sealed store opens with the key the secret
    /// service holds for it (never without it); a new one is sealed with that key, created now if
    /// there is none, under the store's write lock (so two processes creating it at once make one
    /// key: the second finds the first's check record and reads the first's item); a plain store
    /// that holds records stays plain (a key never adopts unsealed records).
    private func secretServiceSealing(_ connection: SQLiteConnection, required: Bool) throws -> Sealing {
        if let check = try Self.checkRecord(connection) {
            return try openWithSecretService(connection, check: check)
        }
        if let plain = try plainStore(connection, required: required) { return plain }
        try connection.execute("BEGIN IMMEDIATE")
        do {
            if let check = try Self.checkRecord(connection) {  // another process sealed it meanwhile
                try connection.execute("COMMIT")
                return try openWithSecretService(connection, check: check)
            }
            if let plain = try plainStore(connection, required: required) {
                try connection.execute("COMMIT")
                return plain
            }
            let cipher: StoreCipher
            switch try keyForNewStore() {
            case .success(let made):
                cipher = made
            case .failure(let reason):
                try connection.execute("ROLLBACK")
                if required {
                    throw AuthError.store(
                        "store.key is keyring but the store \(path) cannot have a key from the secret service: "
                            + "\(reason); nothing was written")
                }
                return Sealing(note: "plain text: no secret service here (\(reason)); set store.encryption_key")
            }
            let check = try Self.writeCheck(connection, cipher: cipher, kind: .secretService)
            try connection.execute("COMMIT")
            return Sealing(cipher: cipher, check: check, kind: .secretService, note: Self.sealedBySecretService)
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// A store without a check record that holds records: plain it stays (refused when the
    /// secret service's key is required). `nil`: the store holds no session record.
    private func plainStore(_ connection: SQLiteConnection, required: Bool) throws -> Sealing? {
        let sealedRows =
            try connection.query("SELECT count(*) FROM sessions WHERE sealed = 1").first?.first?.integerValue ?? 0
        if sealedRows > 0 {
            throw AuthError.store(
                "the store \(path) holds sealed records but no check record (tampered?); nothing was read or written")
        }
        let rows = try connection.query("SELECT count(*) FROM sessions").first?.first?.integerValue ?? 0
        guard rows > 0 else { return nil }
        let advice =
            "`tokenrelay store rekey --new-key-keyring` seals a plain store you trust with a key from the secret "
            + "service"
        if required {
            throw AuthError.store(
                "the store \(path) holds \(rows) session record(s) in plain text: a key never adopts unsealed "
                    + "records; \(advice) (otherwise move the file away to start afresh)")
        }
        return Sealing(note: "plain text: the store was written without a key; \(advice)")
    }

    /// The secret service's key for a new store: the item there is (left by an earlier store at
    /// this path), else a new random one, created and read back. `.failure`: why there is none
    /// (no secret service, a locked collection).
    private func keyForNewStore() throws(AuthError) -> Result<StoreCipher, ReasonText> {
        switch SecretServiceKeyring.lookup(store: path) {
        case .key(let text): return .success(try cipher(fromItem: text))
        case .absent: break
        case .unreachable(let reason): return .failure(ReasonText(reason))
        case .locked: return .failure(ReasonText("its collection is locked, and tokenrelay never prompts"))
        case let other: throw itemProblem(other)
        }
        guard let key = Self.newKey() else { throw AuthError.store("no random bytes available") }
        switch SecretServiceKeyring.create(store: path, key: key) {
        case .done: break
        case .unreachable(let reason): return .failure(ReasonText(reason))
        case .locked: return .failure(ReasonText("its default collection is locked, and tokenrelay never prompts"))
        case let other: throw itemProblem(other)
        }
        switch SecretServiceKeyring.lookup(store: path) {
        case .key(let text): return .success(try cipher(fromItem: text))
        case let other: throw itemProblem(other)
        }
    }

    /// A sealed store opened with the secret service's key.
    private func openWithSecretService(_ connection: SQLiteConnection, check: [UInt8]) throws -> Sealing {
        guard try Self.keyKind(connection) == .secretService else {
            throw AuthError.store("the store \(path) is encrypted; configure store.encryption_key to open it")
        }
        let expected = "the store \(path) was sealed with a key from the secret service"
        let nothing = "nothing was read or written"
        let cipher: StoreCipher
        switch SecretServiceKeyring.lookup(store: path) {
        case .key(let text):
            cipher = try self.cipher(fromItem: text)
        case .absent:
            throw AuthError.store(
                "\(expected), but the secret service holds no key for it (\(SecretServiceKeyring.itemDescription(path)) "
                    + "was removed?); \(nothing). Restore the item, or move the file away to start afresh")
        case .unreachable(let reason):
            throw AuthError.store(
                "\(expected), which is not reachable here (\(reason)); \(nothing). Open it where that secret "
                    + "service runs (there, `tokenrelay store rekey --new-key-env NAME` moves it to a key you "
                    + "configure), or move the file away to start afresh")
        case .locked:
            throw AuthError.store(
                "\(expected), whose item is locked (unlocking it needs a person: log in to the desktop, or "
                    + "unlock the keyring); \(nothing)")
        case let other:
            throw itemProblem(other)
        }
        guard cipher.open(check, associatedData: Self.checkAssociatedData) == Self.checkPlaintext else {
            throw AuthError.store(
                "\(expected), but the key the secret service holds for it does not open it (the item was replaced?); "
                    + nothing)
        }
        return Sealing(cipher: cipher, check: check, kind: .secretService, note: Self.sealedBySecretService)
    }

    private func cipher(fromItem text: String) throws(AuthError) -> StoreCipher {
        guard let bytes = Self.decodeKey(text), let cipher = StoreCipher(key: bytes) else {
            throw AuthError.store(
                "\(SecretServiceKeyring.itemDescription(path)) does not hold a store key (\(StoreKeyText.requirement))")
        }
        return cipher
    }

    private func itemProblem(_ answer: SecretServiceKeyring.Answer) -> AuthError {
        let item = SecretServiceKeyring.itemDescription(path)
        switch answer {
        case .several:
            return AuthError.store(
                "more than one of \(item) exists: remove the ones that do not open the store (secret-tool search --all "
                    + "application \(SecretServiceKeyring.application) store \(path))")
        case .failed(let message): return AuthError.store("\(item) could not be used: \(message)")
        case .unreachable(let reason): return AuthError.store("\(item) could not be used: \(reason)")
        case .locked: return AuthError.store("\(item) is locked (unlocking it needs a person)")
        case .absent: return AuthError.store("\(item) was not found after it was written")
        case .key, .done: return AuthError.store("\(item) could not be used")
        }
    }

    /// Says at a process's first write which the store is: a line at `info`, and, the first time
    /// a store is written plain for want of a secret service, a warning, once per store (recorded
    /// in its `meta` table within the write's transaction, so a loop of `tokenrelay call`s on a
    /// server warns once, not at every call). Only inside a write transaction.
    func announceFirstWrite(_ opened: inout Opened) {
        guard !opened.announced else { return }
        opened.announced = true
        guard opened.keyKind == nil, case .secretService = keySource else {
            log.info("the store \(path) is \(opened.note)")
            return
        }
        let connection = opened.connection
        let warned = (try? connection.query("SELECT 1 FROM meta WHERE name = 'plain_warned'").first) != nil
        if warned {
            log.info("the store \(path) keeps tokens in \(opened.note)")
        } else {
            log.warn("the store \(path) keeps tokens in \(opened.note)")
            _ = try? connection.query("INSERT OR IGNORE INTO meta (name, value) VALUES ('plain_warned', x'01')")
        }
    }

    /// The key for `store rekey` to `new`, with its kind. For the secret service: a new random
    /// key, created there (replacing any item a store at this path left) and read back. Only on
    /// `queue`.
    func rekeyTarget(_ new: NewStoreKey, current: StoreKeyKind?) throws -> (StoreCipher, StoreKeyKind) {
        switch new {
        case .text(let text):
            guard let bytes = Self.decodeKey(text), let cipher = StoreCipher(key: bytes) else {
                throw AuthError.store("the new key \(StoreKeyText.requirement)")
            }
            return (cipher, .configured)
        case .secretService:
            if current == .secretService {
                throw AuthError.store(
                    "the store \(path) is already sealed with a key from the secret service; nothing was changed "
                        + "(to change that key, re-key to one you configure, then back)")
            }
            guard let key = Self.newKey() else { throw AuthError.store("no random bytes available") }
            let unusable = "the secret service cannot keep the store's key; nothing was changed"
            switch SecretServiceKeyring.delete(store: path) {
            case .done, .absent: break
            case .unreachable(let reason): throw AuthError.store("\(unusable) (\(reason))")
            case let other: throw itemProblem(other)
            }
            switch SecretServiceKeyring.create(store: path, key: key) {
            case .done: break
            case .unreachable(let reason): throw AuthError.store("\(unusable) (\(reason))")
            case .locked: throw AuthError.store("\(unusable) (its default collection is locked)")
            case let other: throw itemProblem(other)
            }
            guard case .key(let stored) = SecretServiceKeyring.lookup(store: path), stored == key else {
                throw AuthError.store("\(unusable) (the key written could not be read back)")
            }
            return (try cipher(fromItem: stored), .secretService)
        }
    }

    /// `tokenrelay logout --all --forget-key`: once the store holds no session, removes its
    /// client registrations, check record and key kind (they were sealed with a key about to be
    /// forgotten) in one transaction, then the secret service's item for it. Returns what was
    /// done, in a sentence.
    public func forgetSecretServiceKey() async throws -> String {
        try await open()
        let unsealed = try await onQueue {
            try self.withOpened { opened -> Bool in
                let connection = opened.connection
                try connection.execute("BEGIN IMMEDIATE")
                do {
                    let rows = try connection.query("SELECT count(*) FROM sessions").first?.first?.integerValue ?? 0
                    if rows > 0 {
                        throw AuthError.store(
                            "the store \(self.path) still holds \(rows) session(s) (of another config?): log them out "
                                + "first; the key was not forgotten")
                    }
                    guard try Self.keyKind(connection) == .secretService else {
                        try connection.execute("COMMIT")
                        return false
                    }
                    try connection.query("DELETE FROM registrations")
                    try connection.query("DELETE FROM meta WHERE name IN ('check', 'key')")
                    try connection.execute("COMMIT")
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
                opened.cipher = nil
                opened.checkRecord = nil
                opened.keyKind = nil
                opened.note = "plain text: its key was forgotten"
                self.publishInfo(opened)
                return true
            } ?? false
        }
        let store = unsealed ? "the store is empty and unsealed" : "the store was not sealed with it"
        switch SecretServiceKeyring.delete(store: path) {
        case .done: return "the secret service's key for \(path) was removed (\(store))"
        case .absent: return "the secret service holds no key for \(path) (\(store))"
        case .unreachable(let reason): throw AuthError.store("the key could not be removed: \(reason) (\(store))")
        case .locked: throw AuthError.store("the key could not be removed: its item is locked (\(store))")
        case let other: throw itemProblem(other)
        }
    }
}

/// Why something is not there, for a message.
struct ReasonText: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension SQLiteTokenStore.Sealing {
    init(note: String) { self.init(cipher: nil, check: nil, kind: nil, note: note) }
}
