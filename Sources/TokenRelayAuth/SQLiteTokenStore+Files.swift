import FoundationEssentials
import Glibc

// The store's directory and file: created private, checked by what was opened (never by a path
// looked up again), and SQLite's own descriptor checked against the file that was checked.

extension SQLiteTokenStore {
    /// A file as the kernel names it: device and inode.
    struct FileIdentity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64

        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// The directory and the file that ``prepareFile(_:)`` checked, held open (so that neither can
    /// be replaced by another with the same inode number) until SQLite has opened the file.
    struct CheckedFile: ~Copyable {
        let directory: Int32
        let file: Int32
        /// The file's (set once it is checked).
        var identity: FileIdentity

        /// Hands the file's descriptor to `connection`, which closes it only after SQLite's own
        /// (``SQLiteConnection/holdUntilClosed(_:)``): closing any descriptor of a file drops every
        /// POSIX lock the process holds on it, SQLite's shared lock among them, and with it gone
        /// another process closing its connection takes itself for the last one, checkpoints and
        /// deletes the write-ahead log this process goes on writing to (commits then vanish).
        consuming func handFile(to connection: SQLiteConnection) {
            connection.holdUntilClosed(file)
            Glibc.close(directory)
            discard self
        }

        deinit {
            Glibc.close(file)
            Glibc.close(directory)
        }
    }

    /// The directory part of a file path: what precedes its last `/` (`/` for a file at the
    /// root, `.` for a bare file name).
    static func directoryPart(of path: String) -> String {
        var bytes = Array(path.utf8)
        while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == 0 ? "/" : String(decoding: bytes[..<slash], as: UTF8.self)
    }

    /// The last component of a file path.
    static func namePart(of path: String) -> String {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return path }
        return String(decoding: bytes[(slash + 1)...], as: UTF8.self)
    }

    /// Creates the directory (0700) and the file (0600) when missing; refuses either when it is
    /// a symbolic link, group/world accessible or owned by someone else. Each is opened without
    /// following a symbolic link and checked through its descriptor (`fstat`), and the file is
    /// opened relative to the directory that was checked: a directory or file swapped in by path
    /// between the check and the use is never the one checked.
    static func prepareFile(_ path: String) throws(AuthError) -> CheckedFile {
        let directory = directoryPart(of: path)
        let name = namePart(of: path)
        guard !name.isEmpty, name != ".", name != ".." else {
            throw AuthError.store("the store path \(path) does not name a file")
        }
        var directoryFD = openDirectory(directory)
        if directoryFD < 0, errno == ENOENT {
            try createPrivateDirectory(directory)
            directoryFD = openDirectory(directory)
        }
        guard directoryFD >= 0 else {
            if errno == ELOOP || errno == ENOTDIR {
                throw AuthError.store(
                    "the store directory \(directory) is a symbolic link or not a directory; refusing it "
                        + "(set store.path to a file in a real directory)")
            }
            throw AuthError.store("the store directory \(directory) could not be opened")
        }
        var info = stat()
        guard fstat(directoryFD, &info) == 0 else {
            Glibc.close(directoryFD)
            throw AuthError.store("the store directory \(directory) could not be read")
        }
        do throws(AuthError) {
            try checkOwnership(directory, info, kind: "directory", fix: "chmod 700 \(directory)")
        } catch {
            Glibc.close(directoryFD)
            throw error
        }
        // Read-only and non-blocking: only to check it (a FIFO planted there must not block).
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        var fileFD = openat(directoryFD, name, flags)
        if fileFD < 0, errno == ENOENT {
            fileFD = openat(directoryFD, name, flags | O_CREAT | O_EXCL, 0o600)
            if fileFD >= 0 {
                fchmod(fileFD, 0o600)
            } else if errno == EEXIST {
                fileFD = openat(directoryFD, name, flags)  // another process created it meanwhile
            }
        }
        guard fileFD >= 0 else {
            let reason = errno == ELOOP ? "is a symbolic link; refusing it" : "could not be opened"
            Glibc.close(directoryFD)
            throw AuthError.store("the store file \(path) \(reason)")
        }
        // Owns (and closes) both descriptors from here on.
        var checked = CheckedFile(directory: directoryFD, file: fileFD, identity: FileIdentity(info))
        guard fstat(fileFD, &info) == 0 else { throw AuthError.store("the store file \(path) could not be read") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw AuthError.store("the store \(path) is not a regular file") }
        try checkOwnership(path, info, kind: "file", fix: "chmod 600 \(path)")
        checked.identity = FileIdentity(info)
        return checked
    }

    /// Creates `directory` with mode 0700 from its first instant: `mkdir` with the mode, never a
    /// create-then-chmod (another process starting beside this one would find the directory in the
    /// window open to group and others, and refuse it). Its missing parents are made private too,
    /// but only the store's own directory is checked. A directory another process made meanwhile
    /// is checked like any other.
    private static func createPrivateDirectory(_ directory: String) throws(AuthError) {
        let parent = directoryPart(of: directory)
        if parent != directory, parent != ".", !FileManager.default.fileExists(atPath: parent) {
            do {
                try FileManager.default.createDirectory(
                    atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                // Another process may have made it meanwhile; the mkdir below says whether it is there.
            }
        }
        guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
            throw AuthError.store("the store directory \(directory) could not be created")
        }
    }

    private static func openDirectory(_ directory: String) -> Int32 {
        Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    }

    static func checkOwnership(_ path: String, _ info: stat, kind: String, fix: String) throws(AuthError) {
        guard info.st_uid == geteuid() else {
            throw AuthError.store(
                "the store \(kind) \(path) is owned by another user (uid \(info.st_uid)); refusing it")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw AuthError.store(
                "the store \(kind) \(path) is accessible by group or others (mode \(String(mode, radix: 8))); "
                    + "refusing it (fix: \(fix))")
        }
    }

    /// The descriptors of this process open on `identity`, other than `excluding`; `nil` when
    /// `/proc/self/fd` cannot be read.
    static func descriptors(on identity: FileIdentity, excluding: Int32) -> Set<Int32>? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        var found: Set<Int32> = []
        for name in names {
            guard let fd = Int32(name), fd != excluding else { continue }
            var info = stat()
            if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, FileIdentity(info) == identity {
                found.insert(fd)
            }
        }
        return found
    }
}
