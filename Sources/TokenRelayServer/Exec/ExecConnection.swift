import FoundationEssentials
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// One connection of `tokenrelay exec`'s endpoint: requests read one after another (HTTP/1.1
/// keep-alive), each checked, forwarded and answered before the next is read. A refused request
/// is answered and the connection closed (its body, if any, is never read), so nothing the child
/// sent after a refusal can be taken for another request.
struct ExecConnection {
    let endpoint: ExecEndpoint
    let socket: ExecSocket
    /// Bytes read past the current request.
    var pending: [UInt8] = []

    init(endpoint: ExecEndpoint, socket: ExecSocket) {
        self.endpoint = endpoint
        self.socket = socket
    }

    /// Reads and answers requests until the child closes, a refusal, or cancellation.
    mutating func run() async {
        defer { socket.shutdown() }
        while !Task.isCancelled {
            var parser = HTTPRequestHeadParser()
            var head: HTTPRequestHead?
            while head == nil {
                let chunk = pending.isEmpty ? await socket.read(upTo: 64 << 10) : pending
                pending = []
                guard !chunk.isEmpty else { return }
                do {
                    if let (parsed, consumed) = try parser.feed(chunk) {
                        head = parsed
                        pending = Array(chunk[consumed...])
                    }
                } catch {
                    await refuse(error.status, error.description)
                    return
                }
            }
            guard let head, await handle(head) else { return }
        }
    }

    /// Answers one request; whether the connection may carry another.
    private mutating func handle(_ head: HTTPRequestHead) async -> Bool {
        let started = ContinuousClock.now
        let gate = endpoint.gate
        guard gate.hostAllowed(head.headers) else {
            await refuse(403, "the Host field does not name this endpoint; nothing was sent")
            return false
        }
        let target: ExecTarget
        switch ExecTarget.resolve(head.target, served: Set(endpoint.served.keys)) {
        case .success(let value): target = value
        case .failure(let refusal):
            await refuse(refusal.unknownEnvironment ? 404 : 400, refusal.description + "; nothing was sent")
            return false
        }
        guard let served = endpoint.served[target.environment] else { return false }
        guard gate.presentsPlaceholder(head.headers, credentialHeader: served.profile.credentialHeader) else {
            await refuse(
                401, "present TOKENRELAY_TOKEN (Authorization: Bearer ...); nothing was sent",
                extra: [
                    ("WWW-Authenticate", "Bearer realm=\"tokenrelay exec\""),
                    // git and other libcurl clients send a URL's user:password only when Basic is offered.
                    ("WWW-Authenticate", "Basic realm=\"tokenrelay exec\""),
                ])
            return false
        }
        switch served.exec.decide(method: MCPRule.canonicalMethod(head.method), path: target.path) {
        case .denied(let rule):
            await refuse(403, "refused by the rule deny '\(rule.text)'; nothing was sent")
            return false
        case .unlisted, .confirm:
            await refuse(403, "no exec rule allows \(head.method) \(target.path); nothing was sent")
            return false
        case .allowed:
            break
        }
        if head.headers.values(for: "expect").contains(where: { $0.lowercased() == "100-continue" }) {
            guard await socket.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return false }
        }
        let body: [UInt8]?
        let upload: ExecUpload?
        switch await readBody(head.body) {
        case .success(.whole(let bytes)): (body, upload) = (bytes, nil)
        case .success(.streamed(let streamed)): (body, upload) = (nil, streamed)
        case .failure(let refusal):
            await refuse(refusal.status, refusal.message)
            return false
        }

        let settings = served.environment.settings
        var url = RequestURL.join(base: settings.baseURL, path: target.path.description)
        if let query = target.query { url += "?" + query }
        var fields = ExecGate.forwardedFields(head.headers, credentialHeader: served.profile.credentialHeader)
        // Masking must see the bytes: the transport asks for the codings it decodes, and decodes them.
        if served.exec.redact { fields.remove("accept-encoding") }
        var request = HTTPRequest(method: head.method, url: url, headers: fields, body: body)
        request.bodyStream = upload?.stream
        request.connectTimeout = settings.connectTimeout
        request.delivery = .streamed(idleTimeout: nil)
        // Masking needs the bytes as they are: the transport decodes any content coding.
        request.decodesContent = served.exec.redact
        let logged = Self.loggedURL(base: settings.baseURL, target: target)
        // A body bigger than the replay bound goes on as it arrives, beside the exchange.
        let socket = self.socket
        async let pumped = Self.pump(upload, socket: socket)
        let keep = await forward(request, head: head, served: served, logged: logged, started: started)
        if let upload, !upload.stream.isFinished {
            // Answered before the whole body came: the rest is never read.
            upload.stream.abort()
            socket.shutdown()
        }
        switch await pumped {
        case .none: return keep
        case .leftover(let bytes):
            pending = bytes + pending
            return keep
        case .failed: return false
        }
    }

    /// Sends the request and relays the answer (or a refusal); whether the connection may go on.
    private func forward(
        _ request: HTTPRequest, head: HTTPRequestHead, served: ExecEndpoint.Served, logged: String,
        started: ContinuousClock.Instant
    ) async -> Bool {
        let response: HTTPStreamingResponse
        do {
            response = try await served.client.send(request)
        } catch {
            let failure = ErrorMapping.rpcError(error)
            Logger.shared.info(
                "exec: \(head.method) \(logged) failed: \(failure.message)", [("kind", failure.kind.rawValue)])
            if failure.kind == .interactionRequired {
                Logger.shared.warn("exec: \(failure.message)")
                let description = Self.quotedText(failure.message)
                await refuse(
                    401, failure.message,
                    extra: [
                        (
                            "WWW-Authenticate",
                            "Bearer realm=\"tokenrelay exec\", error=\"invalid_token\", error_description=\"\(description)\""
                        )
                    ])
            } else {
                await refuse(failure.kind == .timeout ? 504 : 502, "tokenrelay: \(failure.message)")
            }
            return false
        }
        let keepAlive = head.keepAlive && head.version == "HTTP/1.1"
        let written = await relay(response, to: head, redact: served.exec.redact, keepAlive: keepAlive)
        Logger.shared.info(
            "exec: \(head.method) \(logged) \(response.status)",
            [("elapsed_ms", String(Self.milliseconds(ContinuousClock.now - started)))])
        return written && keepAlive
    }

    /// Writes the response: the head (hop-by-hop fields dropped, secrets masked in values), then
    /// the body chunked (or until close for HTTP/1.0), masked as it streams.
    private func relay(_ response: HTTPStreamingResponse, to head: HTTPRequestHead, redact: Bool, keepAlive: Bool)
        async -> Bool
    {
        let redactor = Redactor.shared
        let bodiless = head.method == "HEAD" || response.status == 204 || response.status == 304
        let chunked = !bodiless && head.version == "HTTP/1.1"
        var text = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        for field in ExecGate.returnedFields(response.headers) {
            text += "\(field.name): \(redact ? redactor.redact(field.value) : field.value)\r\n"
        }
        if chunked { text += "Transfer-Encoding: chunked\r\n" }
        if !keepAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        // What is ready to go out. A body of announced length goes out with the head in one write
        // once it has all arrived (a small answer is one write); any other body's head goes at once
        // (an event stream's client sees it open before its first event).
        var outgoing = Array(text.utf8)
        let length = bodiless ? nil : response.headers["content-length"].flatMap { Int($0) }
        if length == nil {
            guard await socket.write(outgoing) else {
                response.cancel()
                return false
            }
            outgoing = []
        }
        if bodiless {
            response.cancel()
            return true
        }
        var carry: [UInt8] = []
        var received = 0
        do {
            for try await chunk in response.body {
                carry += chunk
                received += chunk.count
                if received == length { break }
                if redact && !chunk.contains(0x0A) && carry.count < 2 * ExecEndpoint.maskWindow {
                    // Nothing may go out yet without a second scan of the same bytes: a secret
                    // may still be arriving. (What is kept has no line feed: it went out.)
                    continue
                } else if redact {
                    let (masked, consumed) = redactor.redact(
                        stream: carry, window: ExecEndpoint.maskWindow, final: false)
                    carry.removeFirst(consumed)
                    Self.append(masked, to: &outgoing, chunked: chunked)
                } else {
                    Self.append(carry, to: &outgoing, chunked: chunked)
                    carry = []
                }
                guard await socket.write(outgoing) else {
                    response.cancel()
                    return false
                }
                outgoing = []
            }
        } catch {
            Logger.shared.info("exec: the response body ended early: \(ErrorMapping.rpcError(error).message)")
            return false
        }
        Self.append(
            redact ? redactor.redact(stream: carry, window: 0, final: true).masked : carry, to: &outgoing,
            chunked: chunked)
        if chunked { outgoing += Array("0\r\n\r\n".utf8) }
        guard await socket.write(outgoing) else { return false }
        return chunked
    }

    /// Appends `bytes` to `outgoing`, framed as one chunk when `chunked`.
    private static func append(_ bytes: [UInt8], to outgoing: inout [UInt8], chunked: Bool) {
        guard !bytes.isEmpty else { return }
        guard chunked else {
            outgoing += bytes
            return
        }
        outgoing += Array((String(bytes.count, radix: 16) + "\r\n").utf8)
        outgoing += bytes
        outgoing += [0x0D, 0x0A]
    }

    /// Answers a refusal with a short text body and closes the connection.
    private func refuse(_ status: Int, _ message: String, extra: [(String, String)] = []) async {
        Logger.shared.info("exec: refused (\(status)): \(message)")
        let body = Array((message + "\n").utf8)
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\nContent-Type: text/plain; charset=utf-8\r\n"
        for (name, value) in extra { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        _ = await socket.write(Array(text.utf8) + body)
    }

    /// `message` as a quoted-string's content (RFC 9110 §5.6.4): `"` and `\` escaped.
    static func quotedText(_ message: String) -> String {
        var text = ""
        for character in message {
            if character == "\"" || character == "\\" { text.append("\\") }
            text.append(character)
        }
        return text
    }

    /// The URL as logged: the query's names only.
    static func loggedURL(base: String, target: ExecTarget) -> String {
        var url = RequestURL.join(base: base, path: target.path.description)
        if let query = target.query, !query.isEmpty {
            url +=
                "?"
                + query.split(separator: "&").map { ($0.split(separator: "=").first.map(String.init) ?? "") + "=…" }
                .joined(separator: "&")
        }
        return ServerText(url, maximumBytes: 512).value
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 413: "Content Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: ""
        }
    }
}
