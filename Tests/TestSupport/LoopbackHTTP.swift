import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal HTTP/1.1 client over POSIX sockets to 127.0.0.1, for playing a browser against a
/// login's loopback listener and a fixture server (no Foundation networking, no redirects
/// followed), and for opening raw connections a hostile local process would open. Blocking work
/// runs on a thread of its own, never on the cooperative pool.
public enum LoopbackHTTP {
    /// The connection or the answer failed.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// An answer: status, header fields in order, body as text.
    public struct Response: Sendable {
        public let status: Int
        public let headers: [(name: String, value: String)]
        public let body: String

        /// The first value of the field `name` (case-insensitive).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// GETs `url` (`http://127.0.0.1:PORT/...`) with `Connection: close`; fails past `timeout`
    /// seconds without an answer.
    public static func get(_ url: String, timeout: Int = 30) async throws -> Response {
        guard let components = URLComponents(string: url), let port = components.port else {
            throw Failure(description: "not a loopback URL: \(url)")
        }
        let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        return try await OffPool.run { try fetch(port: port, target: target, timeout: timeout) }
    }

    /// Opens a TCP connection to 127.0.0.1:`port` and returns its descriptor (the caller closes
    /// it), once it is established.
    public static func connect(port: Int) async throws -> Int32 {
        try await OffPool.run { try connectBlocking(port: port) }
    }

    /// Reads `fd` until the peer closes it (or `timeout` seconds pass without a byte): what came,
    /// or `nil` on that timeout.
    public static func readToEnd(_ fd: Int32, timeout: Int) async -> [UInt8]? {
        (try? await OffPool.run { readToEndBlocking(fd, timeout: timeout) }) ?? nil
    }

    private static func connectBlocking(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect to \(port): \(errno)")
        }
        return fd
    }

    /// Sends all of `bytes` on `fd`; false when the peer is gone.
    @discardableResult
    public static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    private static func readToEndBlocking(_ fd: Int32, timeout: Int) -> [UInt8]? {
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            guard count > 0 else { return received }  // closed (or reset)
            received += buffer[0..<count]
        }
    }

    private static func fetch(port: Int, target: String, timeout: Int) throws -> Response {
        let fd = try connectBlocking(port: port)
        defer { close(fd) }
        let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request) else { throw Failure(description: "the request could not be sent") }
        guard let response = readToEndBlocking(fd, timeout: timeout) else {
            throw Failure(description: "no answer within \(timeout) s")
        }
        let text = String(decoding: response, as: UTF8.self)
        guard text.hasPrefix("HTTP/1."), let status = Int(text.dropFirst(9).prefix(3)) else {
            throw Failure(description: "not an HTTP answer: \(text.prefix(100))")
        }
        let (head, body) =
            text.range(of: "\r\n\r\n").map { (String(text[..<$0.lowerBound]), String(text[$0.upperBound...])) }
            ?? (text, "")
        let headers = head.components(separatedBy: "\r\n").dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            )
        }
        return Response(status: status, headers: headers, body: body)
    }
}
