import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// The tokenrelay JSON-RPC server: reads frames from stdin, dispatches them to the methods,
/// writes answers and notifications through one serial writer, and stops cleanly on stdin EOF,
/// SIGTERM/SIGINT/SIGQUIT, `exit`, EPIPE or the death of the parent named in `initialize`.
public final class RelayServer: Sendable {
    /// Server name and version as `initialize` reports them.
    public static let name = "tokenrelay"
    public static let version = "0.1.0"
    /// The protocol revision (bumped on incompatible changes).
    public static let protocolVersion = "2026-12-01"

    private struct State {
        var watchdog: Task<Void, Never>?
        /// The MCP face while `run` serves one.
        var mcp: MCPFace?
    }

    let options: ServerOptions
    /// The runtime each method call uses (a reload swaps it).
    let runtimes: CurrentRuntime
    let subscriptions: Subscriptions
    /// The peer's `watch-sessions`, if any.
    let sessionWatchers = SessionWatchers()
    let termination = Termination()
    /// Runs one configuration reload at a time.
    let reloads = SerialRunner()
    /// Guarded by the mutex: lifecycle flags.
    private let state = Mutex(State())

    private init(options: ServerOptions, runtime: RelayRuntime) {
        self.options = options
        runtimes = CurrentRuntime(runtime)
        subscriptions = Subscriptions(runtimes: runtimes)
    }

    /// Builds a server for `settings`; `environment` is `--env` (it overrides the config's
    /// default). Throws an ``RPCError`` of kind `config` when a profile cannot work.
    public static func make(options: ServerOptions, settings: Settings, environment: String? = nil) async throws
        -> RelayServer
    {
        if let environment, settings.environment(named: environment) == nil {
            throw RPCError(
                code: .unknownEnvironment,
                message: "--env names an "
                    + RelayRuntime.unknown("environment", environment, known: settings.environments.map(\.name)))
        }
        do {
            let runtime = try await RelayRuntime.make(
                settings: settings, environmentOverride: environment,
                testLeaseGate: options.testMethods ? options.testLeaseGate : nil)
            return RelayServer(options: options, runtime: runtime)
        } catch {
            throw ErrorMapping.rpcError(error)
        }
    }

    /// The MCP face being served, if any.
    var mcpFace: MCPFace? { state.withLock { $0.mcp } }

    /// The names and types `initialize` reports.
    var catalog: EnvironmentCatalog { runtimes.current.catalog }

    /// Asks the server to stop (signal handlers call this).
    public func terminate(_ reason: TerminationReason) {
        termination.trigger(reason)
    }

    /// Serves on `input` (stdin) and `output` (a dup of the real stdout) until told to stop;
    /// returns the process exit code.
    public func run(input: Int32, output: Int32) async -> Int32 {
        let writer = StdioWriter(
            fileDescriptor: output, onPeerGone: { [termination] in termination.trigger(.peerGone) })
        if let framing = options.framing { writer.framing = framing }
        let face = options.mcp ? MCPFace(server: self) : nil
        face?.attach(sink: writer)
        state.withLock { $0.mcp = face }
        defer { state.withLock { $0.mcp = nil } }
        let methods: [String: MethodHandler] = face?.methodTable() ?? methodTable()
        let notifications: [String: MethodHandler] = face?.notificationTable() ?? notificationTable()
        let readOrder: [String: @Sendable (RequestContext) -> Void] = face == nil ? readOrderNotificationTable() : [:]
        let errorMapper: @Sendable (any Error) -> RPCError
        if face == nil {
            errorMapper = { ErrorMapping.rpcError($0) }
        } else {
            errorMapper = { MCPProtocol.mapError(ErrorMapping.rpcError($0)) }
        }
        var responses: (@Sendable (RequestID, JSONValue?, JSONValue?) -> Void)?
        if let face {
            responses = { id, result, error in face.receiveResponse(id: id, result: result, error: error) }
        }
        let dispatcher = Dispatcher(
            methods: methods, notifications: notifications, readOrderNotifications: readOrder, sink: writer,
            limits: options.dispatcherLimits, shutdownMethod: face == nil ? "shutdown" : nil, errorMapper: errorMapper,
            placement: MethodPlacement(face == nil ? Self.methodPlaces() : MCPFace.methodPlaces, loops: runtimes),
            responses: responses, answersClientCancellation: face == nil,
            unboundedMethods: face == nil ? [] : MCPFace.unboundedMethods)
        let notifier = Notifier(sink: writer)
        let authEvents = Placement.task { [runtimes, sessionWatchers] in
            for await event in runtimes.current.manager.events {
                // An MCP client knows neither notification: the log says it instead (stderr).
                if face != nil {
                    switch event {
                    case .authFailed(let failure):
                        log.warn(
                            "renewal refused for \(failure.environment)/\(failure.profile): \(failure.message)")
                    case .prompt(let prompt):
                        log.info("login for \(prompt.environment)/\(prompt.profile): open \(prompt.url)")
                        face?.loginPrompted(prompt)
                    case .sessionChanged: break
                    }
                    continue
                }
                switch event {
                case .authFailed(let failure):
                    var params: JSONObject = [
                        "environment": .string(failure.environment), "profile": .string(failure.profile),
                        "kind": .string(failure.kind.rawValue), "message": .string(failure.message),
                    ]
                    if let code = failure.oauthError { params["oauthError"] = .string(code) }
                    if let text = failure.oauthErrorDescription { params["oauthErrorDescription"] = .string(text) }
                    await notifier.notify("auth-failed", .object(params))
                case .prompt(let prompt):
                    await notifier.notify("auth-prompt", LoginMethod.promptParams(prompt))
                case .sessionChanged(let change):
                    guard let watch = sessionWatchers.watch(for: change) else { continue }
                    // The watch-sessions answer goes out before its first notification.
                    await watch.answered.wait()
                    await notifier.notify(SessionChangedNotification.method, WatchSessionsMethod.changeParams(change))
                }
            }
        }
        let reader = StdioReader(
            fileDescriptor: input, framing: options.framing, limits: options.framingLimits,
            room: { writer.hasRoom(orWhenRoom: $0) },
            poller: { [runtimes] in runtimes.current.startedInputPoller })
        reader.start(
            onFraming: { writer.framing = $0 },
            onMessage: { dispatcher.receive($0) },
            onError: { dispatcher.receive(framingError: $0) },
            onEnd: { [termination] in termination.trigger(.endOfInput) })

        let reason = await termination.wait()
        log.debug("stopping: \(reason)")
        Self.boundOutput(writer, gracePeriod: options.gracePeriod)
        dispatcher.beginShutdown()
        switch reason {
        case .exitNotification, .peerGone, .parentDied:
            dispatcher.cancelAll(answering: .shuttingDown)
        case .endOfInput, .signal:
            await drain(dispatcher)
        }
        await waitIdle(dispatcher, atMost: Self.cancelledAnswersAllowance)
        if let face { log.info("mcp: http_request calls: \(face.counts.text)") }
        await subscriptions.closeAll()
        await runtimes.close()
        authEvents.cancel()
        await writer.finish()
        state.withLock { $0.watchdog?.cancel() }
        if case .exitNotification(let afterShutdown) = reason { return afterShutdown ? 0 : 1 }
        return 0
    }

    /// How long past the grace period the answers of the requests it cancelled get to reach the
    /// peer.
    static let cancelledAnswersAllowance: Duration = .seconds(2)

    /// Bounds a stopping server's output (every stdio server's, `serve`, `mcp` and `mcp-proxy`,
    /// from the moment it starts to stop): what a peer that stopped reading has not read by the
    /// end of the grace period and the allowance of the cancelled requests' answers is abandoned
    /// (``StdioWriter/abandonUnread(after:)``), so that neither a producer waiting for room nor
    /// the final ``StdioWriter/finish()`` can keep the process from exiting.
    package static func boundOutput(_ writer: StdioWriter, gracePeriod: Duration) {
        writer.abandonUnread(after: gracePeriod + cancelledAnswersAllowance)
    }

    /// Lets in-flight requests finish within the grace period, then cancels the rest (each is
    /// answered with kind `shutting_down`).
    private func drain(_ dispatcher: Dispatcher) async {
        if await !waitIdle(dispatcher, atMost: options.gracePeriod) {
            log.warn("grace period over: cancelling \(dispatcher.inFlightCount) request(s)")
            dispatcher.cancelAll(answering: .shuttingDown)
        }
    }

    /// Waits until the dispatcher is idle or `limit` passes; returns whether it became idle.
    /// (The group cancels the losing child; ``Dispatcher/waitUntilIdle()`` returns on
    /// cancellation, so the bound holds even while a request runs on.)
    @discardableResult
    private func waitIdle(_ dispatcher: Dispatcher, atMost limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await dispatcher.waitUntilIdle()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    // MARK: - Lifecycle state used by the methods

    /// Stops when the parent process dies (checked every two seconds, as LSP servers do).
    func watchParent(_ pid: Int32) {
        guard pid > 0 else { return }
        let watchdog = Placement.detached(.pool) { [termination] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(2))
                if kill(pid, 0) != 0 && errno == ESRCH {
                    log.info("parent process \(pid) is gone: stopping")
                    termination.trigger(.parentDied)
                    return
                }
            }
        }
        let previous = state.withLock { state in
            defer { state.watchdog = watchdog }
            return state.watchdog
        }
        previous?.cancel()
    }
}
