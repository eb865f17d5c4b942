import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// The MCP face of the server (`tokenrelay mcp`, SPEC §8): the MCP methods over the same
/// dispatcher, runtime, token manager and request path as `serve`. Holds what the handshake
/// negotiated, the elicitations waiting for the client's answer and the confirmations issued
/// to stateless clients.
final class MCPFace: Sendable {
    /// A form elicitation sent to the client, waiting for its answer.
    private typealias Waiter = CheckedContinuation<Result<JSONValue, RPCError>, Never>

    /// A confirmation asked of a stateless client (an input-required result), redeemable once by
    /// a retry of the same call within ``confirmationLifetime``.
    private struct IssuedConfirmation {
        var fingerprint: String
        var expires: ContinuousClock.Instant
    }

    private struct State {
        /// The handshake revision `initialize` settled on.
        var negotiated: String?
        /// The capabilities the client declared in `initialize`.
        var clientCapabilities: JSONValue?
        /// `notifications/initialized` was received.
        var initialized = false
        var waiters: [String: Waiter] = [:]
        var nextElicitation = 0
        var confirmations: [String: IssuedConfirmation] = [:]
        var sink: MessageSink?
        /// Tool calls waiting for the prompt of a login they started, by session name.
        var loginWaiters: [String: [CheckedContinuation<LoginPrompt?, Never>]] = [:]
        /// The last prompt of each session's login (a call joining a login in progress uses it).
        var loginPrompts: [String: LoginPrompt] = [:]
    }

    /// How long a person has to answer a confirmation.
    static let confirmationLifetime = Duration.seconds(300)
    /// Confirmations kept at once (the oldest are dropped past it).
    static let confirmationCapacity = 256

    let server: RelayServer
    /// Guarded by the mutex.
    private let state = Mutex(State())
    /// Tool calls received so far (numbers the audit lines).
    private let toolCalls = Atomic<Int>(0)
    /// What became of the `http_request` calls (``ToolCallCounts``).
    private let callCounts = Mutex(ToolCallCounts())

    /// What became of this process's `http_request` calls: `list_environments` shows them and
    /// the process says them at exit.
    struct ToolCallCounts: Equatable, Sendable {
        /// Calls whose request was sent (any HTTP status).
        var sent = 0
        /// Calls a rule, the arguments or the person refused: nothing was sent.
        var refused = 0
        /// Calls that failed otherwise (transport, authentication, a login needed).
        var failed = 0
        /// Calls answered with a question to the person (a stateless client's confirmation or login).
        var awaiting = 0

        var value: JSONValue {
            ["sent": .int(sent), "refused": .int(refused), "failed": .int(failed), "awaiting": .int(awaiting)]
        }

        var text: String { "\(sent) sent, \(refused) refused, \(failed) failed, \(awaiting) awaiting the person" }
    }

    /// The counts so far.
    var counts: ToolCallCounts { callCounts.withLock { $0 } }

    /// Counts one `http_request` call's outcome.
    func count(_ update: (inout ToolCallCounts) -> Void) {
        callCounts.withLock { update(&$0) }
    }

    init(server: RelayServer) {
        self.server = server
    }

    /// Gives the face the writer (server-initiated messages go through it).
    func attach(sink: MessageSink) {
        state.withLock { $0.sink = sink }
    }

    // MARK: - Tables

    /// The MCP request methods by name.
    func methodTable() -> [String: MethodHandler] {
        [
            "initialize": { [self] params, _ in try initialize(params) },
            "ping": { [self] params, _ in
                let era = try era(params)
                return MCPProtocol.finish([:], era: era)
            },
            "server/discover": { [self] params, _ in try discover(params) },
            "tools/list": { [self] params, _ in try await listTools(params) },
            "tools/call": { [self] params, context in try await callTool(params, context: context) },
        ]
    }

    /// Where the methods run: a tools/call on the transfer loop of the environment its
    /// arguments name (as a `request`); the rest where own tasks run.
    static let methodPlaces: [String: MethodPlacement.Place] = [
        "tools/call": .transfer(environmentAt: ["arguments", "environment"])
    ]

    /// The methods answered at once however many calls run or wait (local answers: a host's
    /// liveness check and tool list never wait behind transfers or a person's consent).
    static let unboundedMethods: Set<String> = ["initialize", "ping", "server/discover", "tools/list"]

    /// The MCP notifications acted on (`notifications/cancelled` is the dispatcher's own).
    func notificationTable() -> [String: MethodHandler] {
        [
            "notifications/initialized": { [self] _, _ in
                state.withLock { $0.initialized = true }
                return JSONValue.null
            }
        ]
    }

    /// The era of a request (its `_meta`, else the handshake).
    func era(_ params: JSONValue?) throws(RPCError) -> MCPProtocol.Era {
        let negotiated = state.withLock { $0.negotiated }
        return try MCPProtocol.era(of: params, negotiated: negotiated)
    }

    /// The client capabilities that apply to a request of `era`.
    func clientCapabilities(_ era: MCPProtocol.Era) -> JSONValue? {
        switch era {
        case .stateless(_, let capabilities): capabilities
        case .handshake: state.withLock { $0.clientCapabilities }
        }
    }

    // MARK: - Lifecycle

    private func initialize(_ params: JSONValue?) throws -> JSONValue {
        guard case .object(let members)? = params else {
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "", reason: "initialize needs params")])
        }
        guard case .string(let requested)? = members["protocolVersion"] else {
            throw RPCError.invalidParams([
                ParamDiagnostic(pointer: "/protocolVersion", reason: "must be a protocol version string")
            ])
        }
        // The client's revision when supported, else the newest handshake revision.
        let version =
            MCPProtocol.handshakeVersions.contains(requested) ? requested : MCPProtocol.handshakeVersions[0]
        state.withLock { state in
            state.negotiated = version
            state.clientCapabilities = members["capabilities"]
        }
        log.debug("mcp: initialize asked for \(requested.prefix(40)), answering \(version)")
        return [
            "protocolVersion": .string(version),
            "capabilities": ["tools": ["listChanged": true]],
            "serverInfo": MCPProtocol.serverInfo,
            "instructions": .string(MCPTools.instructions),
        ]
    }

    private func discover(_ params: JSONValue?) throws -> JSONValue {
        // Answered whatever version the request names: this is how a client learns them.
        MCPProtocol.finish(
            [
                "supportedVersions": .array(MCPProtocol.supportedVersions.map { .string($0) }),
                "capabilities": ["tools": ["listChanged": true]],
                "instructions": .string(MCPTools.instructions),
                "ttlMs": 0, "cacheScope": "private",
            ], era: .stateless(version: MCPProtocol.statelessVersions[0], capabilities: [:]))
    }

    // MARK: - Tools

    private func listTools(_ params: JSONValue?) async throws -> JSONValue {
        let era = try era(params)
        let tools = server.runtimes.current.mcpExposure.toolDefinitions
        var result: JSONObject = ["tools": .array(tools)]
        if era.isStateless {
            // The list changes only with a reload; a local answer costs nothing to fetch again.
            result["ttlMs"] = 0
            result["cacheScope"] = "private"
        }
        return MCPProtocol.finish(result, era: era)
    }

    private func callTool(_ params: JSONValue?, context: RequestContext) async throws -> JSONValue {
        let era = try era(params)
        guard case .string(let name)? = params?["name"] else {
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "/name", reason: "must be a tool name")])
        }
        let arguments = params?["arguments"] ?? .object([:])
        guard case .object(let argumentMembers) = arguments else {
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "/arguments", reason: "must be an object")])
        }
        let number = toolCalls.add(1, ordering: .relaxed).newValue
        let outcome: MCPToolOutcome
        switch name {
        case MCPTools.httpRequest:
            let call = HTTPRequestTool(face: self, era: era, params: params, number: number, context: context)
            outcome = await call.run(argumentMembers)
        case MCPTools.listEnvironments:
            outcome = try await server.runtimes.use { runtime in
                try await MCPTools.listEnvironments(runtime: runtime, server: server)
            }
            log.info("mcp: call #\(number) list_environments")
        default:
            throw RPCError.invalidParams(
                [ParamDiagnostic(pointer: "/name", reason: "unknown tool '\(name.prefix(100))'")],
                message: "unknown tool '\(name.prefix(100))'")
        }
        return outcome.value(era: era)
    }

    // MARK: - Elicitation (handshake era: a server-initiated request)

    /// Asks the person, through the client, to accept `message`; returns the client's `action`.
    /// Bounded by ``confirmationLifetime`` and by the calling task's cancellation.
    func elicit(message: String, version: String?) async -> Result<String, RPCError> {
        let (id, sink): (String, MessageSink?) = state.withLock { state in
            state.nextElicitation += 1
            return ("tokenrelay-elicitation-\(state.nextElicitation)", state.sink)
        }
        guard let sink else { return .failure(RPCError(kind: .internal, message: "no output to ask through")) }
        var params: JSONObject = ["message": .string(message), "requestedSchema": MCPTools.consentSchema]
        if version != "2025-06-18" { params["mode"] = "form" }
        let request: JSONValue = [
            "jsonrpc": "2.0", "id": .string(id), "method": "elicitation/create", "params": .object(params),
        ]
        let answer: Result<JSONValue, RPCError> = await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { group in
                let result = await withCheckedContinuation { (continuation: Waiter) in
                    let registered = state.withLock { state in
                        guard !Task.isCancelled else { return false }
                        state.waiters[id] = continuation
                        return true
                    }
                    guard registered else {
                        continuation.resume(returning: .failure(.cancelled))
                        return
                    }
                    group.addTask { [self] in
                        try? await Task.sleep(for: Self.confirmationLifetime)
                        resume(id, with: .failure(RPCError(kind: .timeout, message: "no answer from the person")))
                    }
                    sink.sendNow(request.serialized())
                }
                group.cancelAll()
                return result
            }
        } onCancel: {
            resume(id, with: .failure(.cancelled))
        }
        return answer.flatMap { value in
            guard case .string(let action)? = value["action"] else {
                return .failure(
                    RPCError(kind: .invalidRequest, message: "the client's elicitation answer has no action"))
            }
            return .success(action)
        }
    }

    /// An answer to one of our requests (the dispatcher calls this on the stdin reader).
    func receiveResponse(id: RequestID, result: JSONValue?, error: JSONValue?) {
        guard case .string(let key) = id else { return }
        if let result {
            resume(key, with: .success(result))
        } else {
            let message = error?["message"]?.stringValue.map { String($0.prefix(200)) } ?? "error"
            resume(key, with: .failure(RPCError(kind: .internal, message: "the client could not ask: \(message)")))
        }
    }

    private func resume(_ id: String, with result: Result<JSONValue, RPCError>) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume(returning: result)
    }

    // MARK: - Logins (URL-mode elicitation, 2025-11-25)

    /// Whether the client of `era` takes URL-mode elicitations (a handshake client that declared
    /// `elicitation.url`).
    func supportsURLElicitation(_ era: MCPProtocol.Era) -> Bool {
        clientCapabilities(era)?["elicitation"]?["url"] != nil
    }

    /// Starts the login of `session` in the background and returns its prompt, once the token
    /// manager has one (bounded: a call never waits on a person); `started` is false when a
    /// login this face started is still waiting for the person (its prompt is returned again).
    /// The login goes on after the call has answered; a retry once the person has logged in
    /// succeeds.
    func startLogin(_ session: SessionKey, runtime: RelayRuntime) async -> (prompt: LoginPrompt, started: Bool)? {
        let name = session.environment + "\u{0}" + session.profile
        if let prompt = state.withLock({ $0.loginPrompts[name] }), prompt.expiresAt > Date() { return (prompt, false) }
        let manager = runtime.manager
        let prompt: LoginPrompt? = await withTaskGroup(of: Void.self) { group in
            let prompt = await withCheckedContinuation { (continuation: CheckedContinuation<LoginPrompt?, Never>) in
                state.withLock { $0.loginWaiters[name, default: []].append(continuation) }
                Placement.detached(.pool) { [self] in
                    do {
                        _ = try await manager.login(session, openBrowser: false)
                        log.info("login of \(session.environment)/\(session.profile) completed")
                    } catch {
                        log.warn("login of \(session.environment)/\(session.profile) ended: \(error)")
                    }
                    // The next call that needs a login starts a new one.
                    state.withLock { _ = $0.loginPrompts.removeValue(forKey: name) }
                }
                group.addTask { [self] in
                    try? await Task.sleep(for: .seconds(5))
                    let waiters = state.withLock { $0.loginWaiters.removeValue(forKey: name) ?? [] }
                    for waiter in waiters { waiter.resume(returning: nil) }
                }
            }
            group.cancelAll()
            return prompt
        }
        return prompt.map { ($0, true) }
    }

    /// A login's prompt from the token manager: wakes the calls waiting for it.
    func loginPrompted(_ prompt: LoginPrompt) {
        let name = prompt.environment + "\u{0}" + prompt.profile
        let waiters = state.withLock { state in
            state.loginPrompts[name] = prompt
            return state.loginWaiters.removeValue(forKey: name) ?? []
        }
        for waiter in waiters { waiter.resume(returning: prompt) }
    }

    /// Asks the client to open `url` (URL-mode elicitation); the answer is not waited for.
    func openURL(_ url: String, message: String) {
        let (sink, number): (MessageSink?, Int) = state.withLock { state in
            state.nextElicitation += 1
            return (state.sink, state.nextElicitation)
        }
        let request: JSONValue = [
            "jsonrpc": "2.0", "id": .string("tokenrelay-login-\(number)"), "method": "elicitation/create",
            "params": [
                "mode": "url", "message": .string(message), "url": .string(url),
                "elicitationId": .string("tokenrelay-login-\(number)"),
            ],
        ]
        sink?.sendNow(request.serialized())
    }

    // MARK: - Confirmation (stateless era: input-required results)

    /// Issues a single-use state for a confirmation of the call `fingerprint` names.
    func issueConfirmation(fingerprint: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let token = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: "-")
        let now = ContinuousClock.now
        state.withLock { state in
            state.confirmations = state.confirmations.filter { $0.value.expires > now }
            if state.confirmations.count >= Self.confirmationCapacity,
                let oldest = state.confirmations.min(by: { $0.value.expires < $1.value.expires })
            {
                state.confirmations[oldest.key] = nil
            }
            state.confirmations[token] = IssuedConfirmation(
                fingerprint: fingerprint, expires: now + Self.confirmationLifetime)
        }
        return token
    }

    /// Redeems `token` for the call `fingerprint` names: true once, for an issued, unexpired
    /// state of that same call.
    func redeemConfirmation(_ token: String, fingerprint: String) -> Bool {
        state.withLock { state in
            guard let issued = state.confirmations.removeValue(forKey: token) else { return false }
            return issued.fingerprint == fingerprint && issued.expires > ContinuousClock.now
        }
    }

    // MARK: - Reload

    /// After a reload that changed what is exposed: tells a handshake client to list the tools
    /// again (stateless clients see it at their next `tools/list`).
    func exposureChanged() async {
        let (sink, initialized, negotiated) = state.withLock { ($0.sink, $0.initialized, $0.negotiated) }
        guard let sink, initialized || negotiated != nil else { return }
        await sink.send(
            MessageCodec.notification(method: "notifications/tools/list_changed", params: .object([:])).serialized())
    }
}
