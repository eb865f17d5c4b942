import FoundationEssentials
import Synchronization
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the browser brought to the redirect URI (RFC 6749 §4.1.2), `state` already checked.
struct RedirectCallback: Sendable, Equatable {
    /// What the authorization server answered.
    enum Outcome: Sendable, Equatable {
        /// The authorization code.
        case code(String)
        /// The server's refusal (`error`, `error_description`).
        case refused(error: String, description: String?)
    }

    /// The answer: a code or a refusal.
    let outcome: Outcome
    /// Every `iss` parameter the callback carried (RFC 9207): none, one, or (a malformed
    /// response) several. Checked before ``outcome`` is acted on.
    let issuers: [String]

    init(_ outcome: Outcome, issuers: [String] = []) {
        self.outcome = outcome
        self.issuers = issuers
    }
}

/// The loopback redirect listener of an authorization-code login (RFC 8252 §7.3): a TCP socket
/// bound to 127.0.0.1 only, answering requests until one to the redirect path carries the right
/// `state` (others get a 400 or 404 page and the listener keeps waiting), then closed. The browser's
/// connection of that callback is held until ``BrowserAnswer/send(_:)`` answers it with the outcome.
///
/// Any local process can connect to the port, so nothing a connection does may delay the callback
/// or the end of the login. The design: one thread of its own runs one `poll(2)` loop over the
/// listening socket, a wake-up pipe (the owner's stop) and every connection, all non-blocking.
/// Each connection's request head is read as its bytes arrive, bounded in size
/// (``maximumRequestHead``) and in time (``headTimeout`` from its accept: an absolute deadline, so
/// a client trickling a byte a second is cut off like an idle one), and at most
/// ``maximumConnections`` are read at once (a new one pushes out the oldest). No call on the
/// thread ever blocks on a peer, so the callback is served as soon as it arrives whatever other
/// connections are open, and a stop is seen at once. (One thread per connection with
/// `SO_RCVTIMEO` would bound each read, not the whole head, and stopping would need every
/// thread woken.) The descriptors are guarded by `descriptors`; connections belong to the thread.
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
    /// Requests refused before the callback (wrong state, wrong path, unreadable, too slow, pushed
    /// out), for tests and logs.
    let refusedRequests = Atomic<Int>(0)
    /// How long a connection has, from its accept, to send its whole request head.
    let headTimeout: Duration

    /// Bytes of request head read at most per connection.
    static let maximumRequestHead = 16 << 10
    /// Connections read at once; one more pushes out the oldest.
    static let maximumConnections = 32

    private init(port: Int, path: String, listen: Int32, wake: (Int32, Int32), headTimeout: Duration) {
        self.port = port
        self.path = path
        self.headTimeout = headTimeout
        descriptors = Mutex(Descriptors(listen: listen, wakeRead: wake.0, wakeWrite: wake.1))
    }

    deinit { close() }

    /// Binds 127.0.0.1 on the first port of `ports` that is free (0 = an ephemeral port).
    static func bind(ports: [Int], path: String, headTimeout: Duration = .seconds(10)) throws(AuthError)
        -> LoopbackRedirectListener
    {
        var failures: [String] = []
        for port in ports.isEmpty ? [0] : ports {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
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
            var pipeFDs: [Int32] = [0, 0]
            guard pipe(&pipeFDs) == 0 else {
                Glibc.close(fd)
                throw .configuration("cannot create the redirect listener's wake-up pipe")
            }
            for pipeFD in pipeFDs {
                _ = fcntl(pipeFD, F_SETFD, FD_CLOEXEC)
                _ = fcntl(pipeFD, F_SETFL, fcntl(pipeFD, F_GETFL) | O_NONBLOCK)
            }
            return LoopbackRedirectListener(
                port: Int(UInt16(bigEndian: actual.sin_port)), path: path, listen: fd, wake: (pipeFDs[0], pipeFDs[1]),
                headTimeout: headTimeout)
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

    /// One accepted connection whose request head is being read (owned by the listener's thread).
    private struct Connection {
        let fd: Int32
        /// The end of its time to send the head.
        let deadline: ContinuousClock.Instant
        var head = RequestHead()
    }

    /// The poll loop (on the listener's thread): returns the callback, or fails when stopped.
    /// Every connection but the callback's is closed when it returns.
    private func serve(state: String) -> Result<(RedirectCallback, BrowserAnswer), any Error> {
        let (listenFD, wakeFD) = descriptors.withLock { ($0.listen, $0.wakeRead) }
        var connections: [Connection] = []
        defer { for connection in connections { Glibc.close(connection.fd) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = ContinuousClock.now
            connections.removeAll { connection in
                guard connection.deadline <= now else { return false }
                refuse(connection.fd, nil, why: "its request head did not arrive in time")
                return true
            }
            var polls = [
                pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            ]
            polls += connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let timeout = connections.map(\.deadline).min().map { Self.milliseconds(from: now, to: $0) } ?? -1
            let ready = poll(&polls, nfds_t(polls.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failure(AuthError.transport("the redirect listener failed"))
            }
            if polls[1].revents != 0 { return .failure(CancellationError()) }
            // Backwards, so that removing one keeps the indices of those still to visit.
            for index in connections.indices.reversed() where polls[index + 2].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { recv(connections[index].fd, $0.baseAddress, $0.count, 0) }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                guard count > 0 else {
                    // Closed (or failed) before a whole head: nothing to answer.
                    Glibc.close(connections.remove(at: index).fd)
                    continue
                }
                connections[index].head.append(buffer[0..<count])
                guard let target = connections[index].head.target else { continue }
                let answer = BrowserAnswer(fd: connections.remove(at: index).fd)
                guard let target else {
                    refuse(answer, .badRequest("The request could not be read."), why: "unreadable or too large")
                    continue
                }
                switch RedirectRequest.evaluate(target: target, path: path, state: state) {
                case .callback(let callback):
                    return .success((callback, answer))
                case .refuse(let page):
                    refuse(answer, page, why: "HTTP \(page.status)")
                }
            }
            if polls[0].revents != 0 {
                acceptWaiting(listenFD, into: &connections)
            }
        }
    }

    /// Accepts every connection waiting on `listenFD` (non-blocking), pushing out the oldest ones
    /// past ``maximumConnections``.
    private func acceptWaiting(_ listenFD: Int32, into connections: inout [Connection]) {
        for _ in 0..<Self.maximumConnections {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { return }  // EAGAIN: none left; ECONNABORTED, EMFILE: next round
            // (accept4 is behind _GNU_SOURCE, which the Glibc module does not show.)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            if connections.count >= Self.maximumConnections {
                refuse(connections.removeFirst().fd, nil, why: "too many connections at once")
            }
            connections.append(Connection(fd: fd, deadline: ContinuousClock.now + headTimeout))
        }
    }

    /// Counts a refused request and answers it with `page` (or just closes it).
    private func refuse(_ fd: Int32, _ page: BrowserPage?, why: String) {
        refuse(BrowserAnswer(fd: fd), page, why: why)
    }

    private func refuse(_ answer: BrowserAnswer, _ page: BrowserPage?, why: String) {
        refusedRequests.add(1, ordering: .relaxed)
        log.debug("login redirect listener refused a connection (\(why))")
        if let page { answer.send(page) } else { answer.discard() }
    }

    /// Milliseconds from `now` to `deadline` for `poll`, rounded up (0 when it has passed).
    static func milliseconds(from now: ContinuousClock.Instant, to deadline: ContinuousClock.Instant) -> Int32 {
        let (seconds, attoseconds) = (deadline - now).components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow else { return Int32.max }
        return Int32(clamping: milliseconds.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

/// A request head read as its bytes arrive (pure): complete at its blank line, or refused once
/// it passes ``LoopbackRedirectListener/maximumRequestHead`` bytes without one.
struct RequestHead: Sendable {
    private(set) var bytes: [UInt8] = []
    /// Where the search for the blank line resumes.
    private var scanned = 0

    /// Appends bytes that arrived.
    mutating func append(_ more: ArraySlice<UInt8>) {
        bytes += more.prefix(LoopbackRedirectListener.maximumRequestHead - bytes.count)
    }

    /// `nil` while incomplete; then `.some(nil)` for an unreadable or too large head, `.some("")`
    /// for a request that is not `GET ... HTTP/1.x` (answered 404), or the request target.
    var target: String?? {
        mutating get {
            guard let end = headEnd() else {
                return bytes.count >= LoopbackRedirectListener.maximumRequestHead ? .some(nil) : nil
            }
            let firstLine = bytes[..<end].split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false)[0]
            let line = String(decoding: firstLine.last == 0x0D ? firstLine.dropLast() : firstLine, as: UTF8.self)
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count == 3, parts[0] == "GET", parts[2].hasPrefix("HTTP/1.") else { return .some("") }
            return .some(String(parts[1]))
        }
    }

    /// The index just past the head's blank line (`CRLF CRLF` or `LF LF`), if it arrived.
    private mutating func headEnd() -> Int? {
        var index = max(scanned, 1)
        while index < bytes.count {
            if bytes[index] == 0x0A {
                if bytes[index - 1] == 0x0A { return index + 1 }
                if index >= 3, bytes[index - 1] == 0x0D, bytes[index - 2] == 0x0A { return index + 1 }
            }
            index += 1
        }
        scanned = max(1, bytes.count)
        return nil
    }
}

/// The held browser connection of the callback; answered once, then closed.
final class BrowserAnswer: Sendable {
    private let fd: Mutex<Int32?>

    /// The answer to the browser's connection `fd`; `nil`: no browser waits (a pasted URL).
    init(fd: Int32?) { self.fd = Mutex(fd) }

    deinit { send(.failure("The login ended.")) }

    /// Writes `page` and closes the connection (only the first call writes). Never waits for the
    /// peer: the page (under 1 KiB) goes into the socket's send buffer of a connection that has not
    /// been written to, and whatever does not fit is dropped (a peer that shrank its window to
    /// nothing gets no page).
    func send(_ page: BrowserPage) {
        guard let fd = take() else { return }
        let bytes = page.response
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        shutdown(fd, Int32(SHUT_WR))
        Glibc.close(fd)
    }

    /// Closes the connection without an answer.
    func discard() {
        guard let fd = take() else { return }
        Glibc.close(fd)
    }

    private func take() -> Int32? {
        fd.withLock { value -> Int32? in
            defer { value = nil }
            return value
        }
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

    /// HTML-escapes `text` (`& < > " '`) after the one cleaner (``ServerText``: control and
    /// bidirectional formatting characters become spaces, secrets are masked).
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in ServerText(text, maximumBytes: 4096).value.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(scalar)
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
        let issuers = fields.filter { $0.0 == "iss" }.map(\.1)
        if let error = value("error") {
            return .callback(
                RedirectCallback(.refused(error: error, description: value("error_description")), issuers: issuers))
        }
        guard let code = value("code"), !code.isEmpty else {
            return .refuse(.badRequest("The callback carries no authorization code."))
        }
        Redactor.shared.register(code)
        return .callback(RedirectCallback(.code(code), issuers: issuers))
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
