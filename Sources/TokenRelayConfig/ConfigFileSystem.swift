import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a file could not be read.
public enum FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing at the path.
    case notFound(path: String)
    /// The file exists but could not be read (permissions, a directory, an I/O error).
    case unreadable(path: String, reason: String)

    public var description: String {
        switch self {
        case .notFound(let path): return "\(path): no such file"
        case .unreadable(let path, let reason): return "\(path): cannot read (\(reason))"
        }
    }
}

/// The file reads the config layer needs, behind a protocol so tests can use in-memory files.
public protocol ConfigFileSystem: Sendable {
    /// The whole content of the file at `path`.
    func contents(atPath path: String) throws(FileSystemError) -> [UInt8]
    /// The file's permission bits (`st_mode & 0o777`), or `nil` when nothing is at `path`.
    func permissions(atPath path: String) -> UInt32?
}

/// The real file system, through `open`/`read`/`stat`.
public struct LocalFileSystem: ConfigFileSystem {
    public init() {}

    public func contents(atPath path: String) throws(FileSystemError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { throw .notFound(path: path) }
            throw .unreadable(path: path, reason: String(cString: strerror(code)))
        }
        defer { close(descriptor) }
        // A regular file is read in one call into a buffer its size (plus one byte, to see the end);
        // a pipe or a /proc file reports size 0 and is read in 64 KiB steps. The buffer is not
        // zero-filled: a start-up reading a 2 KiB config should not touch 16 pages.
        var info = stat()
        let size = fstat(descriptor, &info) == 0 ? Int(info.st_size) : 0
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: min(max(size + 1, 512), 65536), alignment: 1)
        defer { chunk.deallocate() }
        var result: [UInt8] = []
        result.reserveCapacity(size)
        while true {
            let count = read(descriptor, chunk.baseAddress, chunk.count)
            if count == 0 { return result }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, reason: String(cString: strerror(errno)))
            }
            result.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
            if result.count > 16 * 1024 * 1024 { throw .unreadable(path: path, reason: "larger than 16 MiB") }
        }
    }

    public func permissions(atPath path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt32(info.st_mode) & 0o777
    }
}

/// Files held in memory, for tests and tools.
public final class InMemoryFileSystem: ConfigFileSystem {
    /// Guarded by the mutex: path -> (content, permission bits).
    private let files: Mutex<[String: (bytes: [UInt8], mode: UInt32)]>

    public init(_ files: [String: String] = [:], mode: UInt32 = 0o600) {
        self.files = Mutex(files.mapValues { (Array($0.utf8), mode) })
    }

    /// Adds or replaces a file.
    public func write(_ text: String, toPath path: String, mode: UInt32 = 0o600) {
        files.withLock { $0[path] = (Array(text.utf8), mode) }
    }

    public func contents(atPath path: String) throws(FileSystemError) -> [UInt8] {
        guard let bytes = files.withLock({ $0[path]?.bytes }) else { throw .notFound(path: path) }
        return bytes
    }

    public func permissions(atPath path: String) -> UInt32? {
        files.withLock { $0[path]?.mode }
    }
}
