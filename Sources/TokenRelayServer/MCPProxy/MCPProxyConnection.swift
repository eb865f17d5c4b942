import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// One proxied connection to a remote MCP server: the transport session (`Mcp-Session-Id`, the
/// negotiated version, the server's GET stream) and the forwarding of each message with the
/// profile's credentials, renewing, logging in or stepping up once when the server asks.
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

    let runtime: RelayRuntime
    let environment: EnvironmentRuntime
    let profile: ProfileRuntime
    let credentials: any CredentialSource
    let openBrowser: Bool
    private let output: @Sendable ([UInt8]) async -> Void
    /// The MCP endpoint.
    let endpoint: String
    private let state = Mutex(State())

    init(
        runtime: RelayRuntime, environment: EnvironmentRuntime, profile: ProfileRuntime,
        credentials: any CredentialSource, openBrowser: Bool, output: @escaping @Sendable ([UInt8]) async -> Void
    ) {
        self.runtime = runtime
        self.environment = environment
        self.profile = profile
        self.credentials = credentials
        self.openBrowser = openBrowser
        self.output = output
        endpoint = environment.settings.baseURL
    }

    /// Why a message could not be delivered.
    private struct Undelivered: Error {
        let message: String
    }

    /// What the proxy may still do for one message.
    private struct Recovery {
        var renewed = false
        var steppedUp = false
        /// The tools were listed again after a `HeaderMismatch`.
        var relisted = false
        /// The message was signed again with a DPoP nonce the server asked for.
        var resigned = false
    }

    /// What became of a relayed answer.
    private enum Relayed {
        case delivered
        /// A `tools/call` refused with `HeaderMismatch` (-32020), not relayed: list and send again.
        case headerMismatch
    }

    /// Forwards one message from the client and relays the answer.
    func forward(_ bytes: [UInt8]) async {
        guard let message = MCPMessage(bytes) else {
            await output(
                MCPMessage.errorAnswer(id: .null, code: -32700, message: "the message is not one JSON-RPC object"))
            return
        }
        var recovery = Recovery()
        do {
            while true {
                if let retry = try await attempt(message, recovery: &recovery), retry { continue }
                return
            }
        } catch is CancellationError {
            return
        } catch let error as Undelivered {
            await answerUndelivered(message, error.message)
        } catch {
            await answerUndelivered(message, Self.describe(error))
        }
    }

    private func answerUndelivered(_ message: MCPMessage, _ reason: String) async {
        log.warn("mcp-proxy: a message could not be delivered: \(reason)")
        guard message.isRequest, let id = message.id else { return }
        await output(
            MCPMessage.errorAnswer(id: id, code: -32603, message: "tokenrelay could not deliver the request: \(reason)")
        )
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? any KindedError {
            return "\(error.errorKind.rawValue): \(String(describing: error))"
        }
        return String(describing: error)
    }

    /// Sends `message` once; true when it should be sent again (after a renewal, login, step-up or
    /// a new tool list). `deliver`: the answer goes to the client (false: the proxy's own request).
    private func attempt(_ message: MCPMessage, recovery: inout Recovery, deliver: Bool = true) async throws -> Bool? {
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
        let stamp = try await applyCredentials(to: &request)
        let response = try await environment.plainClient.send(request)
        // A DPoP profile: the server's nonce is kept; a use_dpop_nonce challenge is answered by
        // signing again with it (RFC 9449 §9: the server did not act on the message), once.
        if credentials.signsAgain(after: response.status, headers: response.headers, request: request),
            !recovery.resigned
        {
            response.cancel()
            recovery.resigned = true
            return true
        }
        switch response.status {
        case 401:
            response.cancel()
            guard !recovery.renewed else { throw Undelivered(message: "the server refused the renewed token (401)") }
            recovery.renewed = true
            try await recoverFromUnauthorized(response.headers, stamp: stamp)
            return true
        case 403:
            let challenge = Self.bearerChallenge(response.headers)
            guard challenge?.parameter("error") == "insufficient_scope" else { break }
            response.cancel()
            guard !recovery.steppedUp else {
                throw Undelivered(message: "the server still asks for more scope (403 insufficient_scope)")
            }
            recovery.steppedUp = true
            try await stepUp(challenge)
            return true
        default:
            break
        }
        if try await relay(response, for: message, deliver: deliver, relist: !recovery.relisted) == .headerMismatch {
            // MCP 2026-07-28: the tool's x-mcp-header declarations changed (or were never seen):
            // list the tools again and send the call once more with the headers they ask for.
            recovery.relisted = true
            log.info("mcp-proxy: the server refused the call's Mcp-Param headers; listing its tools again")
            try await relistTools(like: message)
            return true
        }
        return nil
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
        var recovery = Recovery()
        while try await attempt(list, recovery: &recovery, deliver: false) == true {}
    }

    /// Attaches the profile's credential; a session that needs a person logs in first (joining a
    /// login in progress in this or another process).
    @discardableResult
    private func applyCredentials(to request: inout HTTPRequest) async throws -> CredentialStamp {
        do {
            return try await credentials.apply(to: &request)
        } catch let error as AuthError where error.oauthError == "invalid_client" && profile.discovery != nil {
            // The registration was refused (expired, or forgotten by the server): the source dropped
            // it, so the next attempt registers again (and logs in with the new client).
            log.info("mcp-proxy: the client registration was refused; registering again")
        } catch let error as any KindedError where error.errorKind == .interactionRequired {
            try await logIn()
            return try await credentials.apply(to: &request)
        }
        do {
            return try await credentials.apply(to: &request)
        } catch let error as any KindedError where error.errorKind == .interactionRequired {
            try await logIn()
            return try await credentials.apply(to: &request)
        }
    }

    /// The session of the profile (resolved by discovery for a discovered profile).
    private func sessionKey() async throws -> SessionKey {
        if let key = profile.session { return key }
        guard let discovery = profile.discovery else { throw Undelivered(message: "the profile has no session") }
        return try await discovery.key()
    }

    private func logIn() async throws {
        guard profile.typeName == "authorization_code" || profile.typeName == "device_code" else {
            throw Undelivered(message: "the profile needs a login but is not interactive")
        }
        let key = try await sessionKey()
        do {
            _ = try await runtime.manager.login(key, openBrowser: openBrowser)
        } catch let error as AuthError where error.oauthError != nil {
            // A refused code exchange (`invalid_client`: the registration is gone): discover and
            // register again on the next attempt.
            await profile.discovery?.tokenRequestRefused(error)
            throw error
        }
    }

    /// A 401: a discovered profile follows the challenge's `resource_metadata` (and `scope`); the
    /// token the request carried is invalidated; the next attempt renews or logs in.
    private func recoverFromUnauthorized(_ headers: HTTPHeaders, stamp: CredentialStamp) async throws {
        let challenge = Self.bearerChallenge(headers)
        if let discovery = profile.discovery {
            let scopes = challenge?.parameter("scope").map { $0.split(separator: " ").map(String.init) }
            let key = try await discovery.key(
                metadataHint: challenge?.parameter("resource_metadata"), challengeScopes: scopes)
            // The challenge's scopes are authoritative for this request (MCP authorization): when
            // the session lacks some, it asks for the union from now on (bounded like a step-up).
            if let scopes, !Set(scopes).isSubset(of: Set(key.scopes)) {
                do {
                    _ = try await discovery.stepUp(scopes: scopes)
                    return
                } catch {
                    log.info("mcp-proxy: the 401's scope was not added: \(Self.describe(error))")
                }
            }
        }
        try await credentials.invalidate(stamp: stamp)
    }

    /// A 403 `insufficient_scope`: the session asks for the union of its scopes and the
    /// challenge's (SPEC §9.2); an interactive one logs in again for it.
    private func stepUp(_ challenge: WWWAuthenticateChallenge?) async throws {
        guard let discovery = profile.discovery else {
            throw Undelivered(message: "the server asks for more scope (403 insufficient_scope)")
        }
        let scopes = challenge?.parameter("scope").map { $0.split(separator: " ").map(String.init) } ?? []
        let key = try await discovery.stepUp(scopes: scopes)
        if profile.typeName == "authorization_code" || profile.typeName == "device_code" {
            _ = try await runtime.manager.login(key, openBrowser: openBrowser)
        }
    }

    static func bearerChallenge(_ headers: HTTPHeaders) -> WWWAuthenticateChallenge? {
        WWWAuthenticateChallenge.parse(headers: headers).first { $0.isScheme("Bearer") }
    }

    /// Relays an answer: a JSON body as one message, an event stream event by event, in order.
    private func relay(
        _ response: HTTPStreamingResponse, for message: MCPMessage, deliver: Bool = true, relist: Bool = false
    ) async throws -> Relayed {
        if let sessionID = response.headers["Mcp-Session-Id"], MCPMessage.isHeaderSafe(sessionID) {
            state.withLock { $0.sessionID = sessionID }
        }
        let contentType = response.headers["Content-Type"]?.lowercased() ?? ""
        if response.status == 202 || (response.status == 200 && contentType.isEmpty) {
            response.cancel()
            if message.method == "notifications/initialized" { startServerStream() }
            return .delivered
        }
        if contentType.hasPrefix("text/event-stream") && (200..<300).contains(response.status) {
            var parser = ServerSentEventParser()
            for try await chunk in response.body {
                for event in try parser.feed(chunk) {
                    await emit(Array(event.data.utf8), for: message, deliver: deliver)
                }
            }
            return .delivered
        }
        let collected = try await response.collect(upTo: environment.settings.maxResponseBytes)
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
        throw Undelivered(message: "the server answered HTTP \(response.status)")
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
            if deliver { await output(listed) }
            return
        }
        if deliver { await output(text.bytes) }
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

    /// Opens the GET stream for server messages once, when the server gave a session.
    func startServerStream() {
        let start = state.withLock { state -> Bool in
            guard !state.serverStreamStarted, state.sessionID != nil || state.negotiatedVersion != nil else {
                return false
            }
            state.serverStreamStarted = true
            return true
        }
        guard start else { return }
        let task = Task { await self.followServerStream() }
        state.withLock { $0.serverStream = task }
    }

    /// Stops the GET stream.
    func stopServerStream() {
        state.withLock { $0.serverStream }?.cancel()
    }

    private func followServerStream() async {
        var delay: Duration = .seconds(1)
        var renewed = false
        while !Task.isCancelled {
            do {
                let (sessionID, negotiated) = state.withLock { ($0.sessionID, $0.negotiatedVersion) }
                var headers = HTTPHeaders()
                headers.add(name: "Accept", value: "text/event-stream")
                if let sessionID { headers.add(name: "Mcp-Session-Id", value: sessionID) }
                if let negotiated { headers.add(name: "MCP-Protocol-Version", value: negotiated) }
                var request = HTTPRequest(method: "GET", url: endpoint, headers: headers)
                request.delivery = .streamed(idleTimeout: nil)
                let stamp = try await applyCredentials(to: &request)
                let response = try await environment.plainClient.send(request)
                if response.status == 401 && !renewed {
                    response.cancel()
                    renewed = true
                    try await recoverFromUnauthorized(response.headers, stamp: stamp)
                    continue
                }
                guard response.status == 200,
                    response.headers["Content-Type"]?.lowercased().hasPrefix("text/event-stream") == true
                else {
                    response.cancel()
                    log.debug("mcp-proxy: the server offers no stream of its own (HTTP \(response.status))")
                    return
                }
                renewed = false
                delay = .seconds(1)
                var parser = ServerSentEventParser()
                for try await chunk in response.body {
                    for event in try parser.feed(chunk) {
                        guard !event.data.isEmpty, let text = try? JSONParser.compact(Array(event.data.utf8)) else {
                            continue
                        }
                        await output(text.bytes)
                    }
                }
            } catch is CancellationError {
                return
            } catch {
                log.info("mcp-proxy: the server's stream failed: \(Self.describe(error)); reconnecting")
            }
            do { try await Task.sleep(for: delay) } catch { return }
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// Ends the server's session (DELETE with its `Mcp-Session-Id`), if it gave one.
    func endSession() async {
        guard let sessionID = state.withLock({ $0.sessionID }) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Mcp-Session-Id", value: sessionID)
        if let version = state.withLock({ $0.negotiatedVersion }) {
            headers.add(name: "MCP-Protocol-Version", value: version)
        }
        var request = HTTPRequest(method: "DELETE", url: endpoint, headers: headers, timeout: .seconds(5))
        do {
            _ = try await credentials.apply(to: &request)
            let response = try await environment.plainClient.send(request)
            response.cancel()
            log.debug("mcp-proxy: session ended (HTTP \(response.status))")
        } catch {
            log.debug("mcp-proxy: the session could not be ended: \(Self.describe(error))")
        }
    }
}
