import CSystem

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writing to a file descriptor: what ``DescriptorWriter`` and the command line (which must not go
/// through buffered `print`) write with.
public enum OutputFile {
    /// Writes all of `bytes` to `fileDescriptor`, retrying on EINTR and short writes. Returns
    /// false on any other error (EPIPE: the reader is gone).
    @discardableResult
    public static func writeAll(_ fileDescriptor: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let written = write(fileDescriptor, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    /// What an output is, which decides whether a writer may write to it without a thread of
    /// its own: a pipe (as Python's and Emacs's subprocesses give), a socket (libuv's: Neovim,
    /// Node, VS Code), a regular file or `/dev/null` (where a service manager, an editor that
    /// drops a child's stderr, or `2>/dev/null` sends it) may be written without blocking; a
    /// terminal may not.
    public enum Kind: Sendable, Equatable {
        case pipe, socket, regularFile, null, other

        /// The kind of `fileDescriptor` (`other` when it cannot be told).
        public init(_ fileDescriptor: Int32) {
            var info = stat()
            guard fstat(fileDescriptor, &info) == 0 else {
                self = .other
                return
            }
            switch info.st_mode & S_IFMT {
            case S_IFIFO: self = .pipe
            case S_IFSOCK: self = .socket
            case S_IFREG: self = .regularFile
            // /dev/null is character device 1:3, whose dev_t is 0x103 (glibc's makedev puts
            // the low 12 bits of the major above the low 8 of the minor); any other device (a
            // terminal) may block.
            case S_IFCHR where info.st_rdev == 0x103: self = .null
            default: self = .other
            }
        }

        /// Whether ``OutputFile/writeWithoutBlocking(_:_:kind:)`` can write to it.
        public var takesWritesWithoutBlocking: Bool { self != .other }
    }

    /// How ``writeWithoutBlocking(_:_:kind:)`` ended.
    public enum NonBlockingWrite: Equatable {
        /// This many bytes went out (all of them, or as many as fitted before the output would
        /// have blocked).
        case written(Int)
        /// The kernel writes to this pipe only blocking (before 4.14, or a pipe without
        /// `RWF_NOWAIT` support), after this many bytes: write the rest from a thread.
        case unsupported(Int)
        /// The output failed (EPIPE: the reader is gone).
        case failed
    }

    /// Writes as much of `bytes` as can go without blocking: into a pipe or a socket, one
    /// non-blocking write of what fits (retried on EINTR and short writes); into a regular file
    /// or /dev/null, all of it. A terminal (`other`) takes nothing. Never blocks on a slow reader.
    public static func writeWithoutBlocking(_ fileDescriptor: Int32, _ bytes: [UInt8], kind: Kind) -> NonBlockingWrite {
        switch kind {
        case .other: return .unsupported(0)
        case .regularFile, .null: return writeAll(fileDescriptor, bytes) ? .written(bytes.count) : .failed
        case .pipe, .socket: break
        }
        return bytes.withUnsafeBytes { buffer -> NonBlockingWrite in
            guard let base = buffer.baseAddress else { return .written(0) }
            var written = 0
            while written < buffer.count {
                let count =
                    kind == .pipe
                    ? tr_write_nowait(fileDescriptor, base + written, buffer.count - written)
                    : send(fileDescriptor, base + written, buffer.count - written, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
                if count >= 0 {
                    written += count
                    continue
                }
                switch errno {
                case EINTR: continue
                case EAGAIN: return .written(written)
                case EOPNOTSUPP, EINVAL: return .unsupported(written)
                default: return .failed
                }
            }
            return .written(written)
        }
    }
}
