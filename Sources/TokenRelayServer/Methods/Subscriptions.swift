import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// `subscribe` / `unsubscribe`: each subscription is one task that pulls its ``EventSource`` and
/// writes `event` and `subscription-state` notifications. The task pulls only as fast as the
/// writer accepts notifications, so a slow peer pauses the transfer instead of growing memory.
package final class Subscriptions: Sendable {
    private let runtimes: CurrentRuntime
    /// The running subscriptions.
    let registry = SubscriptionRegistry()

    init(runtimes: CurrentRuntime) {
        self.runtimes = runtimes
    }

    /// How many subscriptions are open.
    var count: Int { registry.count }

    /// Starts a subscription (``SubscribeMethod`` decodes its params and refuses batches).
    func subscribe(_ params: RequestParams, context: RequestContext) async throws -> SubscribeMethod.Result {
        // A subscribe that raced a reload starts over with the new configuration.
        while true {
            let runtime = runtimes.current
            if let answer = try await start(params, runtime: runtime, context: context) { return answer }
        }
    }

    /// Starts the subscription on `runtime`; `nil` when a reload replaced `runtime` meanwhile.
    private func start(_ params: RequestParams, runtime: RelayRuntime, context: RequestContext) async throws
        -> SubscribeMethod.Result?
    {
        let (source, environment, profile) = try await Self.source(params, runtime: runtime)
        let notifier = Notifier(context: context)
        let replyHandedOver = context.replyHandedOver
        // Registered under the registry's lock only while `runtime` is still the current one and
        // the registry is not closing: a reload swaps the runtime and a close marks the registry
        // under that same lock, so nothing registers behind their backs.
        let registry = self.registry
        return try registry.register(
            environment: environment.name, profile: profile?.name, isCurrent: { runtimes.current === runtime }
        ) { id in
            Placement.detached(.pool) {
                // The reply carrying the id goes out before any notification of the subscription.
                await replyHandedOver.wait()
                await Self.pump(source, id: id, notifier: notifier)
                registry.finished(id)
            }
        }.map { SubscribeMethod.Result(subscription: $0) }
    }

    /// The event source of a subscription described by `params` on `runtime`, with the environment
    /// and profile it belongs to: the `subscribe` method's and the one-shot `subscribe` command's.
    package static func source(_ params: RequestParams, runtime: RelayRuntime) async throws
        -> (source: EventSource, environment: EnvironmentRuntime, profile: ProfileRuntime?)
    {
        let environment = try runtime.environment(params.environment)
        let profile = params.auth ? try runtime.profile(params.profile, in: environment) : nil
        let request = try RequestMethod.httpRequest(params, environment: environment)
        try profile?.checkCanSign(request.headers)
        // An interactive session that needs a person fails the call at once (SPEC §5.4), where
        // the credentials middleware would sign the connection.
        if let key = profile?.session, environment.origins.allows(request),
            let needed = await runtime.manager.loginRequirement(key)
        {
            throw needed
        }
        let configuration = EventSourceConfiguration(
            request: request, lastEventID: params.lastEventID, untilClosed: params.untilClosed,
            describeFailure: Self.failure,
            idleTimeout: environment.settings.events.idleTimeout, maxBackoff: environment.settings.events.maxBackoff,
            connectTimeout: params.timeout ?? environment.settings.connectTimeout)
        // The environment's one middleware stack, `request`'s, around one recovery budget that
        // every reconnect of this subscription shares (SPEC §5.5, §7).
        let client = environment.client(for: profile, recoveryBudget: AuthRecoveryBudget())
        return (EventSource(transport: client, configuration: configuration), environment, profile)
    }

    /// The `{kind, message}` of a subscription closed by a pipeline error that is not the
    /// connection's (a refused token says `auth`, `interaction_required`, `config`...): the one
    /// error mapping decides.
    @Sendable static func failure(_ error: any Error) -> EventSourceFailure {
        let mapped = ErrorMapping.rpcError(error)
        return EventSourceFailure(kind: mapped.kind, message: mapped.message)
    }

    /// Makes `runtime` the current one and closes the subscriptions whose environment or profile
    /// `diff` does not keep (each sends its final `closed` state); returns once they are closed.
    func replaceRuntime(with runtime: RelayRuntime, diff: SettingsDiff) async {
        let tasks = registry.replacingRuntime({ runtimes.replace(with: runtime) }) {
            diff.keeps(environment: $0, profile: $1)
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// Closes the subscription `id` (``UnsubscribeMethod``).
    func unsubscribe(id: String) async throws -> JSONValue {
        guard let task = registry.remove(id) else {
            throw RPCError.invalidParams([
                ParamDiagnostic(pointer: "/subscription", reason: "no open subscription with this id")
            ])
        }
        task.cancel()
        await task.value
        return ["subscription": .string(id), "closed": true]
    }

    /// Closes every subscription (each sends its final `closed` state) and refuses new ones.
    func closeAll() async {
        let tasks = registry.close()
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// Writes the source's updates as notifications until it closes or the task is cancelled;
    /// always ends with a `closed` state.
    private static func pump(_ source: EventSource, id: String, notifier: Notifier) async {
        var closed = false
        for await update in source {
            switch update {
            case .event(let event):
                await notifier.notify("event", .object(eventParams(event, id: id)))
            case .state(let change):
                await notifier.notify("subscription-state", stateParams(change, id: id))
                if change.state == .closed { closed = true }
            }
            if Task.isCancelled { break }
        }
        if !closed {
            await notifier.notify("subscription-state", ["subscription": .string(id), "state": "closed"])
        }
    }

    /// An `event` notification's params (without `subscription` when `id` is `nil`).
    package static func eventParams(_ event: ServerSentEvent, id: String?) -> JSONObject {
        var params: JSONObject = [:]
        if let id { params["subscription"] = .string(id) }
        if let lastEventID = event.lastEventID { params["id"] = .string(lastEventID) }
        params["event"] = .string(event.type)
        params["data"] = .string(event.data)
        if let retry = event.retry { params["retry"] = .int(retry) }
        return params
    }

    /// A `subscription-state` notification's params (without `subscription` when `id` is `nil`).
    package static func stateParams(_ change: SubscriptionStateChange, id: String?) -> JSONValue {
        var params: JSONObject = [:]
        if let id { params["subscription"] = .string(id) }
        params["state"] = .string(change.state.rawValue)
        if let attempt = change.attempt { params["attempt"] = .int(attempt) }
        if let retry = change.retryInMs { params["retryInMs"] = .int(retry) }
        if let status = change.status { params["status"] = .int(status) }
        if let error = change.error {
            params["error"] = [
                "kind": .string(error.kind.rawValue), "message": .string(Redactor.shared.redact(error.message)),
            ]
        }
        return .object(params)
    }
}

/// The running subscriptions: which exist, and whether new ones are still accepted. Every
/// decision is one critical section, so a `subscribe` racing a close or a reload either
/// registers before it (and is closed by it) or is refused (``RPCError/shuttingDown``) or
/// retried on the new runtime, with no task started.
final class SubscriptionRegistry: Sendable {
    private struct State {
        var nextID = 1
        var active: [String: Entry] = [:]
        var closing = false
    }

    /// One running subscription and what it belongs to (a reload that removes or changes its
    /// environment or profile closes it).
    private struct Entry {
        let task: Task<Void, Never>
        let environment: String
        let profile: String?
    }

    /// Guarded by the mutex: the running subscriptions and the closing mark.
    private let state = Mutex(State())

    /// How many subscriptions are registered.
    var count: Int { state.withLock { $0.active.count } }

    /// Registers a subscription of `environment`/`profile`: under the lock, refuses it when the
    /// registry is closing, returns `nil` when `isCurrent()` says a reload replaced its runtime,
    /// else takes the next id and registers the task `start(id)` creates. `start` only creates
    /// a task (it runs under the lock); nothing is started for a refused subscription.
    func register(
        environment: String, profile: String?, isCurrent: () -> Bool, start: (String) -> Task<Void, Never>
    ) throws(RPCError) -> String? {
        try state.withLock { (table: inout State) throws(RPCError) -> String? in
            guard !table.closing else {
                throw RPCError(
                    code: .shuttingDown, message: "the server is shutting down: no new subscription is accepted")
            }
            guard isCurrent() else { return nil }
            defer { table.nextID += 1 }
            let id = "sub-\(table.nextID)"
            table.active[id] = Entry(task: start(id), environment: environment, profile: profile)
            return id
        }
    }

    /// A subscription's task ended by itself.
    func finished(_ id: String) {
        state.withLock { _ = $0.active.removeValue(forKey: id) }
    }

    /// Unregisters subscription `id`; its task, to cancel, or `nil` when there is none.
    func remove(_ id: String) -> Task<Void, Never>? {
        state.withLock { $0.active.removeValue(forKey: id)?.task }
    }

    /// Runs `replace` (the runtime swap) under the lock and unregisters the subscriptions whose
    /// environment and profile `keeps` does not keep; returns their tasks, to cancel.
    func replacingRuntime(_ replace: () -> Void, keeps: (String, String?) -> Bool) -> [Task<Void, Never>] {
        state.withLock { state in
            replace()
            let ending = state.active.filter { !keeps($0.value.environment, $0.value.profile) }
            for id in ending.keys { state.active[id] = nil }
            return ending.values.map(\.task)
        }
    }

    /// Refuses new subscriptions from now on and unregisters every running one; returns their
    /// tasks, to cancel.
    func close() -> [Task<Void, Never>] {
        state.withLock { state in
            state.closing = true
            defer { state.active = [:] }
            return state.active.values.map(\.task)
        }
    }
}

extension Notifier {
    /// A notifier writing through the same sink as `context`.
    init(context: RequestContext) {
        self.init(sink: context.sink)
    }
}
