import CPostgres
import FoundationEssentials
import Glibc
import TokenRelayPlatform

// The only file of the shared tier that touches C pointers: one libpq connection (Sources/CPostgres).

/// A PostgreSQL failure: the SQLSTATE when the server sent one, and libpq's or the server's
/// primary message (which never contains a bound value or the password).
struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE (`55P03`: lock not available; `57014`: statement cancelled).
    let sqlState: String?
    let message: String

    var description: String { sqlState.map { "PostgreSQL error \($0): \(message)" } ?? "PostgreSQL: \(message)" }

    /// `error` as a PostgreSQL failure (anything else is described).
    static func from(_ error: any Error) -> PostgresError {
        error as? PostgresError ?? PostgresError(sqlState: nil, message: "\(error)")
    }
}

/// One libpq connection, used by one thread at a time.
///
/// Invariants: `handle` is a connection returned by `PQconnectdbParams` whose status was
/// `CONNECTION_OK`, finished exactly once in `deinit`. Every `PGresult` is cleared before the call
/// that made it returns, and its values are copied into Swift strings first (libpq frees them with
/// the result). Parameters are Swift strings borrowed as C strings for the duration of the call
/// only. Every notification libpq hands out is freed with `PQfreemem` after its fields are copied.
///
/// `@unchecked Sendable`: libpq allows a connection to move between threads but not to be used by
/// two at once; its owner (``PostgresSharedTier``) only ever uses it from one ``SerialThread``
/// (or the listener's own thread), one call at a time.
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    /// Connects with `parameters` (libpq keywords; a `dbname` holding a URL is expanded, and later
    /// keywords override what the URL says). Blocks up to libpq's `connect_timeout`.
    init(parameters: [(String, String)]) throws(PostgresError) {
        guard tr_pq_load() == 1 else {
            throw PostgresError(sqlState: nil, message: "libpq.so.5 could not be loaded (install libpq5)")
        }
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordArray: [UnsafePointer<CChar>?] = keywords.map { $0.map { UnsafePointer($0) } } + [nil]
        let valueArray: [UnsafePointer<CChar>?] = values.map { $0.map { UnsafePointer($0) } } + [nil]
        let connection = keywordArray.withUnsafeBufferPointer { keywordBuffer in
            valueArray.withUnsafeBufferPointer { valueBuffer in
                tr_pq_connect(keywordBuffer.baseAddress, valueBuffer.baseAddress)
            }
        }
        guard let connection else { throw PostgresError(sqlState: nil, message: "out of memory") }
        tr_pq_silence_notices(connection)
        guard tr_pq_connection_ok(connection) == 1 else {
            let message = Self.trimmed(tr_pq_error_message(connection))
            tr_pq_finish(connection)
            throw PostgresError(sqlState: nil, message: message)
        }
        handle = connection
    }

    deinit { tr_pq_finish(handle) }

    /// Runs one statement with text parameters (`$1`, `$2`...; `nil` is SQL NULL) and returns its
    /// rows as text (`nil`: NULL). Blocks until the server answers (bounded by the connection's
    /// `statement_timeout` and `tcp_user_timeout`).
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> [[String?]] {
        let copies = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { copies.forEach { free($0) } }
        let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
        let result = pointers.withUnsafeBufferPointer { buffer in
            tr_pq_exec(handle, sql, Int32(pointers.count), buffer.baseAddress)
        }
        guard let result else {
            throw PostgresError(sqlState: nil, message: Self.trimmed(tr_pq_error_message(handle)))
        }
        defer { tr_pq_clear(result) }
        guard tr_pq_result_ok(result) == 1 else {
            let state = tr_pq_result_sqlstate(result).map { String(cString: $0) }
            let message = tr_pq_result_message(result).map { String(cString: $0) }
            throw PostgresError(sqlState: state, message: message ?? Self.trimmed(tr_pq_error_message(handle)))
        }
        let rows = tr_pq_ntuples(result)
        let columns = tr_pq_nfields(result)
        var out: [[String?]] = []
        out.reserveCapacity(Int(rows))
        for row in 0..<rows {
            var values: [String?] = []
            for column in 0..<columns {
                if tr_pq_getisnull(result, row, column) == 1 {
                    values.append(nil)
                } else if let text = tr_pq_getvalue(result, row, column) {
                    let length = Int(tr_pq_getlength(result, row, column))
                    values.append(
                        String(
                            decoding: UnsafeRawBufferPointer(start: text, count: length).bindMemory(to: UInt8.self),
                            as: UTF8.self))
                } else {
                    values.append(nil)
                }
            }
            out.append(values)
        }
        return out
    }

    /// Waits until a notification arrives (after `LISTEN`) or `timeoutMilliseconds` pass (`-1`:
    /// no bound), on the connection's socket with `poll` (no polling loop), and returns the
    /// channels of what arrived (possibly none). Throws when the connection broke.
    func waitForNotifications(timeoutMilliseconds: Int32) throws(PostgresError) -> [String] {
        var channels = drainNotifications()
        if !channels.isEmpty { return channels }
        let socket = tr_pq_socket(handle)
        guard socket >= 0 else { throw PostgresError(sqlState: nil, message: "the connection has no socket") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready < 0 && errno != EINTR {
            throw PostgresError(sqlState: nil, message: "poll failed (errno \(errno))")
        }
        if ready > 0 {
            guard tr_pq_consume_input(handle) == 1 else {
                throw PostgresError(sqlState: nil, message: Self.trimmed(tr_pq_error_message(handle)))
            }
        }
        channels = drainNotifications()
        return channels
    }

    private func drainNotifications() -> [String] {
        var channels: [String] = []
        while let notification = tr_pq_notifies(handle) {
            channels.append(String(cString: notification.pointee.relname))
            tr_pq_freemem(notification)
        }
        return channels
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        // One line: libpq's messages span several ("server closed the connection...\n\tThis...").
        return String(cString: text).split(whereSeparator: \.isNewline).map { $0.trimmingPrefix(while: \.isWhitespace) }
            .joined(separator: " ")
    }
}
