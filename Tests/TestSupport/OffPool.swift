import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Work a test must not do on the cooperative pool. The pool has one thread per core (two on CI):
/// a test that blocks one (a `poll` that waits for a child, an `fsync`) and another test's long
/// synchronous loop on the other stall every task of the test process until they end, so a
/// callback resumed on the pool (the login listener's, a child's exit) waits with them. Found
/// with ``PoolWatchdog`` (issue 44).
public enum OffPool {
    /// Runs blocking `body` on a thread of its own and returns its result.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Writes `text` to the file at `path` (created or truncated, mode 0644) with plain `write`
    /// calls: Foundation's `Data.write` and `String.write` `fsync` the file, which on a busy disk
    /// holds the calling pool thread for seconds. A test's files need no durability.
    public static func write(_ text: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            bytes = bytes.dropFirst(written)
        }
    }
}
