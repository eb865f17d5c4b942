import FoundationEssentials
import HTTP
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the browser brought to the redirect URI (RFC 6749 §4.1.2), `state` already checked.
enum RedirectCallback: Sendable, Equatable {
    /// The authorization code.
    case code(String)
    /// The server's refusal (`error`, `error_description`).
    case refused(error: String, description: String?)
}

/// The loopback redirect listener of an authorization-code login (RFC 8252 §7.3): a TCP socket
/// bound to 127.0.0.1 only, answering requests until one to the redirect path carries the right
/// `state` (others get a 400 or 404 page and the listener keeps waiting), then closed. The browser's
/// connection of that callback is held until ``BrowserAnswer/send(_:)`` answers it with the outcome.
///
/// All socket work happens on one thread of its own (blocking `poll`/`accept`/`recv`); the owner
/// stops it through a wake-up pipe. The descriptors are guarded by `descriptors`.
final class LoopbackRedirectListener: Sendable {
    /// The bound port.
    let port: Int
    /// The path the redirect URI names.
    let path: String
    /// `http://127.0.0.1:PORT/PATH`, sent identically to the authorization and token endpoints.
    var redirectURI: String { "http://127.0.0.1:\(port)\(path)" }

    private struct Descriptors {
        var listen: Int32
        var wakeRead: Int32
        var wakeWrite: Int32
        var closed = false
    }
    /// Guarded by the mutex; closed exactly once.
    private let descriptors: Mutex<Descriptors>
    /// Requests refused before the callback (wrong state, wrong path), for tests and logs.
    let refusedRequests = Atomic<Int>(0)

    /// Bytes of request head read at most per connection.
    static let maximumRequestHead = 16 << 10

    private init(port: Int, path: String, listen: Int32, wake: (Int32, Int32)) {
        self.port = port
        self.path = path
        descriptors = Mutex(Descriptors(listen: listen, wakeRead: wake.0, wakeWrite: wake.1))
    }

    deinit { close() }

    /// Binds 127.0.0.1 on the first port of `ports` that is free (0 = an ephemeral port).
    static func bind(ports: [Int], path: String) throws(AuthError) -> LoopbackRedirectListener {
        var failures: [String] = []
        for port in ports.isEmpty ? [0] : ports {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw .configuration("cannot create the redirect listener socket") }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, Glibc.listen(fd, 16) == 0 else {
                failures.append("\(port): \(String(cString: strerror(errno)))")
                Glibc.close(fd)
                continue
            }
            var actual = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &actual) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var pipeFDs: [Int32] = [0, 0]
            guard pipe(&pipeFDs) == 0 else {
                Glibc.close(fd)
                throw .configuration("cannot create the redirect listener's wake-up pipe")
            }
            for pipeFD in pipeFDs { _ = fcntl(pipeFD, F_SETFD, FD_CLOEXEC) }
            return LoopbackRedirectListener(
                port: Int(UInt16(bigEndian: actual.sin_port)), path: path, listen: fd, wake: (pipeFDs[0], pipeFDs[1]))
        }
        throw .configuration(
            "cannot listen for the login redirect on 127.0.0.1 (tried ports \(failures.joined(separator: ", ")))")
    }

    /// Waits for the callback carrying `state`. Throws `CancellationError` when the calling task is
    /// cancelled (the thread stops at once). The listener is closed when this returns.
    func callback(state: String) async throws -> (RedirectCallback, BrowserAnswer) {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<(RedirectCallback, BrowserAnswer), any Error>) in
                SystemThread.start(named: "relay-redirect") { [self] in
                    let result = serve(state: state)
                    close()
                    continuation.resume(with: result)
                }
            }
        } onCancel: {
            wake()
        }
    }

    /// Stops a waiting thread.
    func wake() {
        descriptors.withLock { fds in
            guard !fds.closed else { return }
            var byte: UInt8 = 1
            _ = write(fds.wakeWrite, &byte, 1)
        }
    }

    /// Closes every descriptor (idempotent).
    func close() {
        descriptors.withLock { fds in
            guard !fds.closed else { return }
            fds.closed = true
            Glibc.close(fds.listen)
            Glibc.close(fds.wakeRead)
            Glibc.close(fds.wakeWrite)
        }
    }

    /// The accept loop (on the listener's thread).
    private func serve(state: String) -> Result<(RedirectCallback, BrowserAnswer), any Error> {
        let (listenFD, wakeFD) = descriptors.withLock { ($0.listen, $0.wakeRead) }
        while true {
            var polls = [
                pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&polls, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failure(AuthError.transport("the redirect listener failed"))
            }
            if polls[1].revents != 0 { return .failure(CancellationError()) }
            guard polls[0].revents != 0 else { continue }
            let connection = accept(listenFD, nil, nil)
            guard connection >= 0 else { continue }  // EAGAIN, ECONNABORTED: wait again
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let answer = BrowserAnswer(fd: connection)
            guard let target = Self.readRequestTarget(connection) else {
                answer.send(.badRequest("The request could not be read."))
                refusedRequests.add(1, ordering: .relaxed)
                continue
            }
            switch RedirectRequest.evaluate(target: target, path: path, state: state) {
            case .callback(let callback):
                return .success((callback, answer))
            case .refuse(let page):
                refusedRequests.add(1, ordering: .relaxed)
                log.debug("login redirect listener refused a request (\(page.status))")
                answer.send(page)
            }
        }
    }

    /// The request target of a `GET` request head, or nil.
    private static func readRequestTarget(_ fd: Int32) -> String? {
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.count < maximumRequestHead {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            head += buffer[0..<count]
            if let end = head.firstRange(of: [0x0D, 0x0A]) ?? head.firstRange(of: [0x0A]) {
                let line = String(decoding: head[..<end.lowerBound], as: UTF8.self)
                let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                guard parts.count == 3, parts[0] == "GET", parts[2].hasPrefix("HTTP/1.") else { return "" }
                // Drain the rest of the head so the browser sees a clean answer.
                while head.firstRange(of: [0x0D, 0x0A, 0x0D, 0x0A]) == nil && head.count < maximumRequestHead {
                    let more = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    guard more > 0 else { break }
                    head += buffer[0..<more]
                }
                return String(parts[1])
            }
        }
        return nil
    }
}

/// The held browser connection of the callback; answered once, then closed.
final class BrowserAnswer: Sendable {
    private let fd: Mutex<Int32?>

    init(fd: Int32) { self.fd = Mutex(fd) }

    deinit { send(.failure("The login ended.")) }

    /// Writes `page` and closes the connection (only the first call writes).
    func send(_ page: BrowserPage) {
        guard
            let fd = fd.withLock({ value -> Int32? in
                defer { value = nil }
                return value
            })
        else { return }
        let bytes = page.response
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard written > 0 else { break }
            offset += written
        }
        shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }
}

/// A short HTML page for the browser. Everything it shows is escaped.
struct BrowserPage: Sendable, Equatable {
    let status: Int
    let title: String
    let message: String

    /// The login succeeded.
    static let success = BrowserPage(
        status: 200, title: "Login succeeded", message: "tokenrelay is logged in. You can close this window.")
    /// The login failed for `reason`.
    static func failure(_ reason: String) -> BrowserPage {
        BrowserPage(status: 200, title: "Login failed", message: reason)
    }
    /// A request that is not the callback.
    static func badRequest(_ reason: String) -> BrowserPage {
        BrowserPage(status: 400, title: "Bad request", message: reason)
    }
    static let notFound = BrowserPage(status: 404, title: "Not found", message: "This is not the login callback.")

    /// The full HTTP/1.1 response.
    var response: [UInt8] {
        let body = """
            <!doctype html><html><head><meta charset="utf-8"><title>\(Self.escape(title))</title></head>\
            <body><h1>\(Self.escape(title))</h1><p>\(Self.escape(message))</p></body></html>

            """
        let reason =
            switch status {
            case 200: "OK"
            case 404: "Not Found"
            default: "Bad Request"
            }
        let head =
            "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/html; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nCache-Control: no-store\r\nConnection: close\r\n"
            + "Content-Security-Policy: default-src 'none'\r\nReferrer-Policy: no-referrer\r\n\r\n"
        return Array((head + body).utf8)
    }

    /// HTML-escapes `text` (`& < > " '`) and drops control characters.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F { out += " " } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}

/// Pure evaluation of one request to the redirect listener.
enum RedirectRequest {
    /// What to do with a request.
    enum Decision: Equatable {
        /// The callback: end the wait.
        case callback(RedirectCallback)
        /// Answer with this page and keep waiting.
        case refuse(BrowserPage)
    }

    /// Decides on the request target `target` (origin-form: path and query).
    static func evaluate(target: String, path: String, state: String) -> Decision {
        let (requestPath, query) = split(target)
        guard requestPath == path else { return .refuse(.notFound) }
        let fields = FormEncoding.decode(query)
        func value(_ name: String) -> String? {
            let values = fields.filter { $0.0 == name }
            return values.count == 1 ? values[0].1 : nil
        }
        guard let received = value("state"), constantTimeEquals(received, state) else {
            return .refuse(.badRequest("This callback does not belong to the login in progress (wrong state)."))
        }
        if let error = value("error") {
            return .callback(.refused(error: error, description: value("error_description")))
        }
        guard let code = value("code"), !code.isEmpty else {
            return .refuse(.badRequest("The callback carries no authorization code."))
        }
        Redactor.shared.register(code)
        return .callback(.code(code))
    }

    private static func split(_ target: String) -> (String, String) {
        guard let mark = target.firstIndex(of: "?") else { return (target, "") }
        return (String(target[..<mark]), String(target[target.index(after: mark)...]))
    }

    private static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
