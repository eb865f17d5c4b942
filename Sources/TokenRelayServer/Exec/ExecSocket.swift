import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayPlatform

/// A socket of `tokenrelay exec`'s endpoint whose blocking calls (accept, read, write) run on a
/// thread of its own (``SerialThread``), never on an executor; the caller awaits each. A
/// ``shutdown()`` from anywhere wakes a call blocked on it. Guarded by `state`: the descriptor is
/// closed once, after the last call given to the thread.
final class ExecSocket: Sendable {
    private struct State {
        var fd: Int32
        var shut = false
    }
    private let state: Mutex<State>
    private let thread: SerialThread

    init(fd: Int32, name: String) {
        state = Mutex(State(fd: fd))
        thread = SerialThread(named: name)
    }

    deinit {
        let fd = state.withLock { $0.fd }
        // Every job holds `self`: none is left.
        Glibc.close(fd)
    }

    /// Runs `call` with the descriptor on the socket's thread.
    private func blocking<T: Sendable>(_ call: @escaping @Sendable (Int32) -> T) async -> T {
        await withCheckedContinuation { continuation in
            thread.async { [self] in
                let fd = state.withLock { $0.fd }
                continuation.resume(returning: call(fd))
            }
        }
    }

    /// Stops the socket: blocked and later calls fail (idempotent).
    func shutdown() {
        state.withLock { state in
            guard !state.shut else { return }
            state.shut = true
            _ = Glibc.shutdown(state.fd, Int32(SHUT_RDWR))
        }
    }

    /// Reads up to `count` bytes; empty at the end or on an error. Bytes already there are read
    /// here, without a hop to the socket's thread (a non-blocking receive).
    func read(upTo count: Int) async -> [UInt8] {
        let fd = state.withLock { $0.fd }
        var buffer = [UInt8](repeating: 0, count: count)
        let got = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, count, Int32(MSG_DONTWAIT)) }
        if got > 0 { return Array(buffer[..<got]) }
        if got == 0 { return [] }
        return await blocking { fd in
            var buffer = [UInt8](repeating: 0, count: count)
            while true {
                let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) }
                if got < 0 && errno == EINTR { continue }
                return got > 0 ? Array(buffer[..<got]) : []
            }
        }
    }

    /// Writes all of `bytes`; `false` when the peer is gone.
    func write(_ bytes: [UInt8]) async -> Bool {
        guard !bytes.isEmpty else { return true }
        // What the socket takes at once is written here; only the rest waits on the thread.
        let fd = state.withLock { $0.fd }
        let first = bytes.withUnsafeBytes {
            Glibc.send(fd, $0.baseAddress, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if first == bytes.count { return true }
        if first < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR { return false }
        let start = max(first, 0)
        return await blocking { fd in
            var offset = start
            while offset < bytes.count {
                let sent = bytes.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress.map { $0 + offset }, bytes.count - offset, Int32(MSG_NOSIGNAL))
                }
                if sent < 0 && errno == EINTR { continue }
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
    }

    /// Accepts a connection (for a listening socket); `nil` once shut down.
    func accept() async -> Int32? {
        await blocking { fd in
            while true {
                let connection = Glibc.accept(fd, nil, nil)
                if connection >= 0 {
                    _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                    // A response goes out in several writes (head, chunks, the last chunk): without
                    // this, Nagle holds each small one for the client's delayed ACK (40 ms).
                    var one: Int32 = 1
                    _ = setsockopt(
                        connection, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    return connection
                }
                if errno == EINTR || errno == ECONNABORTED { continue }
                return nil
            }
        }
    }

    /// Listens on 127.0.0.1 at an ephemeral port; the socket and the port.
    static func listenLoopback() throws(ExecError) -> (ExecSocket, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ExecError("cannot create the endpoint's socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 128) == 0 else {
            Glibc.close(fd)
            throw ExecError("cannot listen on 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (ExecSocket(fd: fd, name: "relay-exec"), Int(UInt16(bigEndian: actual.sin_port)))
    }

    /// Listens on a Unix socket at `path` (mode 0600; an existing socket file is replaced, any
    /// other file is refused).
    static func listenUnix(path: String) throws(ExecError) -> ExecSocket {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw ExecError("the socket path is empty or too long")
        }
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else {
                throw ExecError("\(path) exists and is not a socket")
            }
            unlink(path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ExecError("cannot create the endpoint's socket") }
        // Created 0600: the umask covers the window between bind and chmod.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        umask(previous)
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw ExecError("cannot listen on \(path): \(reason)")
        }
        return ExecSocket(fd: fd, name: "relay-exec")
    }
}

/// Why `tokenrelay exec` could not start its endpoint.
package struct ExecError: Error, Sendable, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
