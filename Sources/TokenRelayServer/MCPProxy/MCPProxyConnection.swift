import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// One proxied connection to a remote MCP server: what is MCP about it, and only that. The
/// transport session (`Mcp-Session-Id`, the negotiated version, the server's GET stream), the
/// `Mcp-*` headers, re-listing tools, and every request of the host answered exactly once
/// (``MCPProxyFlights``). Credentials, renewals, DPoP nonces, logins and step-ups are the
/// environment's middleware stack's, under the forwarding policy (``CredentialsMiddleware``);
/// every answer the proxy makes itself is an ``ErrorMapping`` error with `data.kind`.
final class MCPProxyConnection: Sendable {
    private struct State {
        var sessionID: String?
        var negotiatedVersion: String?
        var serverStream: Task<Void, Never>?
        var serverStreamStarted = false
        /// The `x-mcp-header` declarations of each tool, from the last `tools/list` answer that
        /// listed it (bounded: ``toolCapacity`` tools).
        var toolHeaders: [String: MCPParameterHeaders] = [:]
    }

    /// Tools whose header declarations are kept at once.
    static let toolCapacity = 4096
    /// Times an event stream that closed before its answers is resumed in a row without an event.
    static let resumptionLimit = 5
    /// The wait before resuming a stream that named no `retry` delay.
    static let defaultRetry: Duration = .seconds(1)

    /// Sends with the profile's credentials under the forwarding policy.
    let client: HTTPClient
    let flights: MCPProxyFlights
    /// The bound on one event stream line and one event's data: the environment's bound on an answer.
    let eventBound: Int
    let maxResponseBytes: Int
    private let output: @Sendable ([UInt8]) async -> Void
    /// The MCP endpoint.
    let endpoint: String
    private let state = Mutex(State())

    init(
        client: HTTPClient, endpoint: String, maxResponseBytes: Int, flights: MCPProxyFlights,
        output: @escaping @Sendable ([UInt8]) async -> Void
    ) {
        self.client = client
        self.endpoint = endpoint
        self.maxResponseBytes = maxResponseBytes
        eventBound = maxResponseBytes
        self.flights = flights
        self.output = output
    }

    /// What became of a relayed answer.
    private enum Relayed {
        case delivered
        /// A `tools/call` refused with `HeaderMismatch` (-32020), not relayed: list and send again.
        case headerMismatch
    }

    /// Forwards one message from the client and relays the answer; a request that got none (it
    /// could not be delivered, or its stream ended first) is answered with an error.
    func forward(_ bytes: [UInt8]) async {
        guard let message = MCPMessage(bytes) else {
            let error = RPCError(kind: .parse, message: "the message is not one JSON-RPC object")
            await output(MCPMessage.errorAnswer(id: .null, error: error))
            return
        }
        let awaited = message.isRequest ? message.id : nil
        if let awaited { flights.awaitAnswer(awaited) }
        // MCP: no answer is sent for a request the host cancelled. Its cancellation is relayed to
        // the server; the proxy answers it no more (a later answer from the server is dropped).
        if let cancelled = message.cancelledID { _ = flights.settle(cancelled) }
        var failure: RPCError?
        do {
            try await send(message, relist: true)
            if let awaited, flights.isAwaited(awaited) {
                failure = RPCError(kind: .protocol, message: "the server's answer ended without answering the request")
            }
        } catch is CancellationError {
            failure = .shuttingDown
        } catch {
            failure = ErrorMapping.rpcError(error)
        }
        guard let failure else { return }
        if let awaited, !flights.settle(awaited) {
            log.debug("mcp-proxy: a cancelled request ended: \(failure.message)")
            return
        }
        log.warn("mcp-proxy: a message could not be delivered: \(failure.message)")
        guard let awaited else { return }
        var answered = failure
        answered.message = "tokenrelay could not deliver the request: \(failure.message)"
        await output(MCPMessage.errorAnswer(id: awaited, error: answered))
    }

    /// Sends `message` and relays its answer (`deliver`: to the client; false: the proxy's own
    /// request); a `tools/call` refused for its headers lists the tools and goes once more.
    private func send(_ message: MCPMessage, deliver: Bool = true, relist: Bool) async throws {
        let (sessionID, negotiated, declared) = state.withLock { state in
            (state.sessionID, state.negotiatedVersion, message.name.flatMap { state.toolHeaders[$0] })
        }
        var headers = message.headers(sessionID: sessionID, negotiated: negotiated)
        if message.method == "tools/call", let declared {
            // MCP 2026-07-28: the parameters the tool's schema marks with x-mcp-header, mirrored.
            for (name, value) in declared.headers(for: message.arguments) { headers.add(name: name, value: value) }
        }
        var request = HTTPRequest(method: "POST", url: endpoint, headers: headers, body: message.bytes)
        request.delivery = .streamed(idleTimeout: nil)
        let response = try await client.send(request)
        if try await relay(response, for: message, deliver: deliver, relist: relist) == .headerMismatch {
            // MCP 2026-07-28: the tool's x-mcp-header declarations changed (or were never seen):
            // list the tools again and send the call once more with the headers they ask for.
            log.info("mcp-proxy: the server refused the call's Mcp-Param headers; listing its tools again")
            try await relistTools(like: message)
            try await send(message, deliver: deliver, relist: false)
        }
    }

    /// Lists the server's tools as the proxy's own request (its answer learnt, never relayed),
    /// with the `_meta` of `message` (the client's protocol version and capabilities).
    private func relistTools(like message: MCPMessage) async throws {
        var params: JSONObject = [:]
        if let meta = message.meta { params["_meta"] = meta }
        let request: JSONValue = [
            "jsonrpc": "2.0", "id": "tokenrelay-tools-list", "method": "tools/list", "params": .object(params),
        ]
        guard let list = MCPMessage(request.serialized()) else { return }
        try await send(list, deliver: false, relist: false)
    }

    /// Relays an answer: a JSON body as one message, an event stream event by event, in order.
    private func relay(
        _ response: HTTPStreamingResponse, for message: MCPMessage, deliver: Bool, relist: Bool
    ) async throws -> Relayed {
        if let sessionID = response.headers["Mcp-Session-Id"], MCPMessage.isHeaderSafe(sessionID) {
            state.withLock { $0.sessionID = sessionID }
        }
        let contentType = response.headers["Content-Type"]?.lowercased() ?? ""
        if response.status == 202 || (response.status == 200 && contentType.isEmpty) {
            response.cancel()
            if message.method == "notifications/initialized" { await startServerStream() }
            return .delivered
        }
        if contentType.hasPrefix("text/event-stream") && (200..<300).contains(response.status) {
            try await relayStream(response, for: message, deliver: deliver)
            return .delivered
        }
        let collected = try await response.collect(upTo: maxResponseBytes)
        if let text = try? JSONParser.compact(collected.body), text.value.objectValue?["jsonrpc"] != nil {
            if relist, message.method == "tools/call", response.status == 400,
                text.value["error"]?["code"]?.numberValue?.intValue == Self.headerMismatch
            {
                return .headerMismatch
            }
            await emit(text.bytes, for: message, deliver: deliver)
            return .delivered
        }
        if (200..<300).contains(response.status) && collected.body.isEmpty { return .delivered }
        throw RPCError(kind: .httpStatus, message: "the server answered HTTP \(response.status)")
    }

    /// Relays a POST's event stream; when it closes (or breaks) before the request's answer, it is
    /// resumed as the 2025-11-25 transport says: a GET with `Last-Event-ID` after the stream's
    /// `retry` delay, as long as the server named event ids.
    private func relayStream(_ response: HTTPStreamingResponse, for message: MCPMessage, deliver: Bool) async throws {
        var parser = ServerSentEventParser(maxLineLength: eventBound, maxEventSize: eventBound)
        var failure = await follow(response, with: &parser) { await self.emit($0, for: message, deliver: deliver) }
        guard deliver, message.isRequest, let id = message.id else {
            if let failure { throw failure }
            return
        }
        var idle = 0
        while flights.isAwaited(id) {
            guard let lastEventID = parser.lastEventID, idle < Self.resumptionLimit else {
                if let failure { throw failure }
                throw RPCError(kind: .protocol, message: "the server's event stream ended before the answer")
            }
            idle += 1
            let before = lastEventID
            failure = try await resume(after: lastEventID, with: &parser) {
                await self.emit($0, for: message, deliver: deliver)
            }
            if parser.lastEventID != before { idle = 0 }
        }
        // Answered: whatever broke the stream after the answer is only logged (never a second answer).
        if let failure { log.info("mcp-proxy: the server's stream ended after the answer: \(Self.describe(failure))") }
    }

    /// Waits the stream's `retry` delay, opens it again with `Last-Event-ID` and follows it.
    private func resume(
        after lastEventID: String, with parser: inout ServerSentEventParser, emit: ([UInt8]) async -> Void
    ) async throws -> (any Error)? {
        try await Task.sleep(for: parser.retry.map { .milliseconds($0) } ?? Self.defaultRetry)
        parser.finish()
        let resumed = try await client.send(streamRequest(lastEventID: lastEventID))
        guard resumed.status == 200,
            resumed.headers["Content-Type"]?.lowercased().hasPrefix("text/event-stream") == true
        else {
            resumed.cancel()
            throw RPCError(kind: .httpStatus, message: "the server did not resume its stream (HTTP \(resumed.status))")
        }
        return await follow(resumed, with: &parser, emit: emit)
    }

    /// Reads an event stream to its end, handing each event's data to `emit`; the error that
    /// ended it, if any (events before it are handed on).
    private func follow(
        _ response: HTTPStreamingResponse, with parser: inout ServerSentEventParser,
        emit: ([UInt8]) async -> Void
    ) async -> (any Error)? {
        do {
            for try await chunk in response.body {
                var events: [ServerSentEvent] = []
                do {
                    try parser.feed(chunk, into: &events)
                } catch {
                    for event in events { await emit(Array(event.data.utf8)) }
                    response.cancel()
                    return error
                }
                for event in events { await emit(Array(event.data.utf8)) }
            }
            return nil
        } catch {
            return error
        }
    }

    /// A GET for the server's stream, resuming after `lastEventID` when given.
    private func streamRequest(lastEventID: String?) -> HTTPRequest {
        let (sessionID, negotiated) = state.withLock { ($0.sessionID, $0.negotiatedVersion) }
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "text/event-stream")
        if let sessionID { headers.add(name: "Mcp-Session-Id", value: sessionID) }
        if let negotiated { headers.add(name: "MCP-Protocol-Version", value: negotiated) }
        if let lastEventID, MCPMessage.isHeaderSafe(lastEventID) {
            headers.add(name: "Last-Event-ID", value: lastEventID)
        }
        var request = HTTPRequest(method: "GET", url: endpoint, headers: headers)
        request.delivery = .streamed(idleTimeout: nil)
        return request
    }

    static func describe(_ error: any Error) -> String {
        let mapped = ErrorMapping.rpcError(error)
        return "\(mapped.kind.rawValue): \(mapped.message)"
    }

    /// The 2026-07-28 error code of a request whose headers do not match its body.
    static let headerMismatch = -32020

    /// Writes one server message (compacted to one line); notes the version an `initialize`
    /// answer negotiated.
    private func emit(_ data: [UInt8], for message: MCPMessage, deliver: Bool = true) async {
        guard !data.isEmpty, let text = try? JSONParser.compact(data) else { return }
        if message.method == "initialize", let value = text.value.objectValue,
            value["id"] == message.id, let version = value["result"]?["protocolVersion"]?.stringValue
        {
            state.withLock { $0.negotiatedVersion = version }
        }
        if message.method == "tools/list", let value = text.value.objectValue, value["id"] == message.id,
            let listed = learnToolHeaders(value)
        {
            if deliver { await write(listed, value: text.value) }
            return
        }
        if deliver { await write(text.bytes, value: text.value) }
    }

    /// Writes one server message to the host; an answer only once, to a request the host sent
    /// and that awaits it (SPEC §9.6): a second answer, or one to an id never forwarded, is
    /// dropped and logged.
    private func write(_ bytes: [UInt8], value: JSONValue) async {
        if let object = value.objectValue, object["method"] == nil, let id = object["id"], id != .null,
            !flights.settle(id)
        {
            log.warn("mcp-proxy: dropped an answer to a request that was answered already or never forwarded")
            return
        }
        await output(bytes)
    }

    /// Keeps the `x-mcp-header` declarations of a `tools/list` answer's tools. A tool whose
    /// declarations are invalid is left out of the answer (the spec's MUST), with a warning; the
    /// answer rewritten without it is returned, `nil` when it goes on unchanged.
    private func learnToolHeaders(_ answer: JSONObject) -> [UInt8]? {
        guard case .object(var result)? = answer["result"], case .array(let tools)? = result["tools"] else {
            return nil
        }
        var kept: [JSONValue] = []
        var learned: [String: MCPParameterHeaders] = [:]
        for tool in tools {
            guard let name = tool["name"]?.stringValue else {
                kept.append(tool)
                continue
            }
            do throws(MCPParameterHeaders.Invalid) {
                learned[name] = try MCPParameterHeaders(inputSchema: tool["inputSchema"])
                kept.append(tool)
            } catch {
                log.warn(
                    "mcp-proxy: the server's tool '\(ServerText(name).value)' is left out: \(ServerText(error.reason).value)"
                )
            }
        }
        state.withLock { state in
            if state.toolHeaders.count + learned.count > Self.toolCapacity { state.toolHeaders = [:] }
            state.toolHeaders.merge(learned) { $1 }
        }
        guard kept.count != tools.count else { return nil }
        result["tools"] = .array(kept)
        var rewritten = answer
        rewritten["result"] = .object(result)
        return JSONValue.object(rewritten).serialized()
    }

    // MARK: - The server's own stream (handshake era)

    /// How long the first message after `notifications/initialized` waits for the server's GET
    /// stream to answer (its head), at most.
    static let serverStreamOpeningBound: Duration = .seconds(5)

    /// Opens the GET stream for server messages once, when the server gave a session, and returns
    /// once the server answered its GET (or refused it, or ``serverStreamOpeningBound`` passed):
    /// the host's messages after `notifications/initialized` are forwarded after it (MCPProxy
    /// forwards notifications in order), so the server's stream is open before the first request
    /// and a resumption GET of a request's stream is never mistaken for it (the conformance
    /// suite's sse-retry times the first GET after a request).
    func startServerStream() async {
        let start = state.withLock { state -> Bool in
            guard !state.serverStreamStarted, state.sessionID != nil || state.negotiatedVersion != nil else {
                return false
            }
            state.serverStreamStarted = true
            return true
        }
        guard start else { return }
        let opened = OneShotSignal()
        let task = Placement.task { await self.followServerStream(opened: opened) }
        state.withLock { $0.serverStream = task }
        await opened.wait(atMost: Self.serverStreamOpeningBound)
    }

    /// Stops the GET stream.
    func stopServerStream() {
        state.withLock { $0.serverStream }?.cancel()
    }

    /// Follows the server's own stream (its requests and notifications), resumed with
    /// `Last-Event-ID` after its `retry` delay, else reconnected with a growing delay.
    private func followServerStream(opened: OneShotSignal) async {
        defer { opened.fire() }
        var delay: Duration = .seconds(1)
        var parser = ServerSentEventParser(maxLineLength: eventBound, maxEventSize: eventBound)
        while !Task.isCancelled {
            do {
                let response: HTTPStreamingResponse
                do {
                    response = try await client.send(streamRequest(lastEventID: parser.lastEventID))
                } catch {
                    opened.fire()
                    throw error
                }
                opened.fire()
                guard response.status == 200,
                    response.headers["Content-Type"]?.lowercased().hasPrefix("text/event-stream") == true
                else {
                    response.cancel()
                    log.debug("mcp-proxy: the server offers no stream of its own (HTTP \(response.status))")
                    return
                }
                delay = .seconds(1)
                if let failure = await follow(response, with: &parser, emit: { await self.emitServerMessage($0) }) {
                    throw failure
                }
            } catch is CancellationError {
                return
            } catch {
                log.info("mcp-proxy: the server's stream failed: \(Self.describe(error)); reconnecting")
            }
            parser.finish()
            let wait = parser.retry.map { Duration.milliseconds($0) } ?? delay
            do { try await Task.sleep(for: wait) } catch { return }
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// A message of the server's own stream.
    private func emitServerMessage(_ data: [UInt8]) async {
        guard !data.isEmpty, let text = try? JSONParser.compact(data) else { return }
        await write(text.bytes, value: text.value)
    }

    /// Ends the server's session (DELETE with its `Mcp-Session-Id`), if it gave one.
    func endSession() async {
        guard let sessionID = state.withLock({ $0.sessionID }) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Mcp-Session-Id", value: sessionID)
        if let version = state.withLock({ $0.negotiatedVersion }) {
            headers.add(name: "MCP-Protocol-Version", value: version)
        }
        let request = HTTPRequest(method: "DELETE", url: endpoint, headers: headers, timeout: .seconds(5))
        do {
            let response = try await client.send(request)
            response.cancel()
            log.debug("mcp-proxy: session ended (HTTP \(response.status))")
        } catch {
            log.debug("mcp-proxy: the session could not be ended: \(Self.describe(error))")
        }
    }
}
