import CCrypto
import CSQLite
import FoundationEssentials
import Glibc

// The only file of the token store that touches C pointers: the SQLite connection and the
// AES-256-GCM sealing of records (libcrypto).

/// A value bound to or read from a SQLite statement.
enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var realValue: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    var textValue: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    var blobValue: [UInt8]? {
        switch self {
        case .blob(let value): value
        case .text(let value): Array(value.utf8)
        default: nil
        }
    }
}

/// A SQLite failure: the result code and SQLite's message (which never contains bound values).
struct SQLiteError: Error, Sendable, CustomStringConvertible {
    let code: Int32
    let message: String

    /// `SQLITE_BUSY` or `SQLITE_LOCKED`: another connection holds the lock past the busy timeout.
    var isBusy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }

    var description: String { "SQLite error \(code): \(message)" }
}

/// One SQLite connection.
///
/// Invariants: `handle` is a connection opened by `sqlite3_open_v2` and is closed exactly once, in
/// `deinit`. Statements are prepared, stepped and finalized inside one call (`query`), so no
/// statement pointer outlives it and none is shared. Column text and blobs are copied into Swift
/// values before the next `step` (SQLite invalidates them then). Bound text and blobs are copied by
/// SQLite (`SQLITE_TRANSIENT` in the shim). The class is not thread-safe: its owner serializes every
/// call (``SQLiteTokenStore`` keeps it inside a `Mutex`).
///
/// `@unchecked Sendable`: it is only ever used inside ``SQLiteTokenStore``'s `Mutex` (one thread
/// at a time), and SQLite itself allows a connection to move between threads
/// (`SQLITE_OPEN_NOMUTEX`, not used concurrently).
final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    /// Opens (creating when `create`) the database at `path`, with a busy timeout.
    init(path: String, create: Bool, busyTimeoutMilliseconds: Int32) throws(SQLiteError) {
        guard tr_sqlite_load() == 1 else {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "libsqlite3.so.0 could not be loaded")
        }
        var pointer: OpaquePointer?
        // NOFOLLOW: a symbolic link as the file is refused (the file was checked without following one).
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        if create { flags |= SQLITE_OPEN_CREATE }
        let code = tr_sqlite_open(path, &pointer, flags)
        guard let pointer else { throw SQLiteError(code: code, message: "out of memory") }
        guard code == SQLITE_OK else {
            let message = String(cString: tr_sqlite_errmsg(pointer))
            tr_sqlite_close(pointer)
            throw SQLiteError(code: code, message: message)
        }
        handle = pointer
        tr_sqlite_busy_timeout(handle, busyTimeoutMilliseconds)
    }

    /// Descriptors of the database file opened outside SQLite (the one its checks were made
    /// through), closed after the connection: see ``SQLiteTokenStore/CheckedFile/handFile(to:)``.
    /// Never closed before: closing any descriptor of the file drops the process's locks on it.
    private var heldDescriptors: [Int32] = []

    deinit {
        tr_sqlite_close(handle)
        for descriptor in heldDescriptors { close(descriptor) }
    }

    /// Keeps `descriptor` open for as long as the connection, and closes it after.
    func holdUntilClosed(_ descriptor: Int32) {
        heldDescriptors.append(descriptor)
    }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws(SQLiteError) {
        let code = tr_sqlite_exec(handle, sql)
        guard code == SQLITE_OK else { throw error(code) }
    }

    /// Runs one statement with `bindings` (`?1`, `?2`...) and returns its rows.
    @discardableResult
    func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [[SQLiteValue]] {
        var statement: OpaquePointer?
        let prepared = tr_sqlite_prepare(handle, sql, &statement)
        guard prepared == SQLITE_OK, let statement else { throw error(prepared) }
        defer { tr_sqlite_finalize(statement) }
        for (offset, value) in bindings.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = tr_sqlite_bind_null(statement, index)
            case .integer(let number): code = tr_sqlite_bind_int64(statement, index, number)
            case .real(let number): code = tr_sqlite_bind_double(statement, index, number)
            case .text(let text): code = tr_sqlite_bind_text(statement, index, text, Int32(text.utf8.count))
            case .blob(let bytes):
                code = bytes.withUnsafeBytes { tr_sqlite_bind_blob(statement, index, $0.baseAddress, Int32($0.count)) }
            }
            guard code == SQLITE_OK else { throw error(code) }
        }
        var rows: [[SQLiteValue]] = []
        while true {
            let code = tr_sqlite_step(statement)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw error(code) }
            rows.append(row(statement))
        }
    }

    /// How many rows the last statement changed.
    var changes: Int { Int(tr_sqlite_changes(handle)) }

    private func row(_ statement: OpaquePointer) -> [SQLiteValue] {
        let count = tr_sqlite_column_count(statement)
        return (0..<count).map { column in
            switch tr_sqlite_column_type(statement, column) {
            case SQLITE_INTEGER: return .integer(tr_sqlite_column_int64(statement, column))
            case SQLITE_FLOAT: return .real(tr_sqlite_column_double(statement, column))
            case SQLITE_TEXT:
                guard let text = tr_sqlite_column_text(statement, column) else { return .text("") }
                let length = Int(tr_sqlite_column_bytes(statement, column))
                let bytes = UnsafeBufferPointer(start: text, count: length)
                return .text(String(decoding: bytes, as: UTF8.self))
            case SQLITE_BLOB:
                let length = Int(tr_sqlite_column_bytes(statement, column))
                guard length > 0, let bytes = tr_sqlite_column_blob(statement, column) else { return .blob([]) }
                return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: length)))
            default: return .null
            }
        }
    }

    private func error(_ code: Int32) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: tr_sqlite_errmsg(handle)))
    }
}

/// AES-256-GCM under one 32-byte key: `seal` returns nonce (12 bytes, fresh from `RAND_bytes`) ||
/// ciphertext || tag (16 bytes); `open` returns `nil` when the tag does not verify (wrong key, or
/// a changed nonce, ciphertext, tag or associated data).
///
/// Invariants: every buffer handed to libcrypto is a Swift array borrowed for the duration of the
/// call (`withUnsafe...`), sized before the call (the output of GCM is as long as its input), and
/// the cipher context is freed on every path (`defer`).
struct StoreCipher: Sendable {
    static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    private let key: [UInt8]

    /// `nil` unless `key` is exactly 32 bytes.
    init?(key: [UInt8]) {
        guard key.count == Self.keyLength else { return nil }
        self.key = key
    }

    /// Seals `plaintext` with `associatedData`; `nil` only if libcrypto failed.
    func seal(_ plaintext: [UInt8], associatedData: [UInt8]) -> [UInt8]? {
        guard let nonce = LibCrypto.randomBytes(Self.nonceLength), let context = tr_EVP_CIPHER_CTX_new() else {
            return nil
        }
        defer { tr_EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var tag = [UInt8](repeating: 0, count: Self.tagLength)
        var length: Int32 = 0
        var total: Int32 = 0
        guard tr_EVP_EncryptInit_ex(context, tr_EVP_aes_256_gcm(), nil, nil, nil) == 1,
            tr_EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(Self.nonceLength), nil) == 1,
            tr_EVP_EncryptInit_ex(context, nil, nil, key, nonce) == 1,
            tr_EVP_EncryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1,
            output.withUnsafeMutableBufferPointer({ out in
                tr_EVP_EncryptUpdate(context, out.baseAddress, &length, plaintext, Int32(plaintext.count))
            }) == 1
        else { return nil }
        total = length
        guard
            output.withUnsafeMutableBufferPointer({ out in
                tr_EVP_EncryptFinal_ex(context, out.baseAddress.map { $0 + Int(total) }, &length)
            }) == 1,
            tag.withUnsafeMutableBytes({
                tr_EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagLength), $0.baseAddress)
            }) == 1
        else { return nil }
        total += length
        return nonce + output[0..<Int(total)] + tag
    }

    /// Opens what ``seal(_:associatedData:)`` produced; `nil` when it does not verify.
    func open(_ sealed: [UInt8], associatedData: [UInt8]) -> [UInt8]? {
        guard sealed.count >= Self.nonceLength + Self.tagLength, let context = tr_EVP_CIPHER_CTX_new() else {
            return nil
        }
        defer { tr_EVP_CIPHER_CTX_free(context) }
        let nonce = Array(sealed[0..<Self.nonceLength])
        let ciphertext = Array(sealed[Self.nonceLength..<(sealed.count - Self.tagLength)])
        var tag = Array(sealed[(sealed.count - Self.tagLength)...])
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        guard tr_EVP_DecryptInit_ex(context, tr_EVP_aes_256_gcm(), nil, nil, nil) == 1,
            tr_EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(Self.nonceLength), nil) == 1,
            tr_EVP_DecryptInit_ex(context, nil, nil, key, nonce) == 1,
            tr_EVP_DecryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1,
            output.withUnsafeMutableBufferPointer({ out in
                tr_EVP_DecryptUpdate(context, out.baseAddress, &length, ciphertext, Int32(ciphertext.count))
            }) == 1
        else { return nil }
        let total = length
        guard
            tag.withUnsafeMutableBytes({
                tr_EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagLength), $0.baseAddress)
            }) == 1,
            output.withUnsafeMutableBufferPointer({ out in
                tr_EVP_DecryptFinal_ex(context, out.baseAddress.map { $0 + Int(total) }, &length)
            }) == 1
        else { return nil }
        return Array(output[0..<Int(total + length)])
    }

}

/// The start time of process `pid` (field 22 of `/proc/PID/stat`, clock ticks since boot), or
/// `nil` when no such process runs (a zombie counts as gone).
func processStartTime(_ pid: Int32) -> Int64? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
    guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
    return Int64(fields[19])
}
