import Config
import ErrorKinds
import Foundation
import HTTP
import JSONRPC
import Logging
import Synchronization

/// `subscribe` / `unsubscribe`: each subscription is one task that pulls its ``EventSource`` and
/// writes `event` and `subscription-state` notifications. The task pulls only as fast as the
/// writer accepts notifications, so a slow peer pauses the transfer instead of growing memory.
final class Subscriptions: Sendable {
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

    private let runtimes: CurrentRuntime
    /// Guarded by the mutex: the running subscriptions.
    private let state = Mutex(State())

    init(runtimes: CurrentRuntime) {
        self.runtimes = runtimes
    }

    /// A subscriptions table of its own runtime (the one-shot `subscribe` command).
    convenience init(runtime: RelayRuntime) {
        self.init(runtimes: CurrentRuntime(runtime))
    }

    /// How many subscriptions are open.
    var count: Int { state.withLock { $0.active.count } }

    /// Starts a subscription (``SubscribeMethod`` decodes its params and refuses batches).
    func subscribe(_ params: RequestParams, context: RequestContext) async throws -> JSONValue {
        // A subscribe that raced a reload starts over with the new configuration.
        while true {
            let runtime = runtimes.current
            if let answer = try await start(params, runtime: runtime, context: context) { return answer }
        }
    }

    /// Starts the subscription on `runtime`; `nil` when a reload replaced `runtime` meanwhile.
    private func start(_ params: RequestParams, runtime: RelayRuntime, context: RequestContext) async throws
        -> JSONValue?
    {
        let environment = try runtime.environment(params.environment)
        let profile = params.auth ? try runtime.profile(params.profile, in: environment) : nil
        var request = try RequestMethod.httpRequest(params, environment: environment)
        try profile?.checkCanSign(request.headers)
        let allowed = environment.origins.allows(url: request.url)
        // An interactive session that needs a person fails the call at once (SPEC §5.4).
        if allowed, let key = profile?.session, let needed = await runtime.manager.loginRequirement(key) {
            throw needed
        }
        if allowed {
            for field in environment.headers where !request.headers.contains(field.name) {
                request.headers.add(name: field.name, value: field.value)
            }
        } else if profile != nil {
            log.debug(
                "credentials withheld: origin not allowed",
                [("origin", Origin(url: request.url)?.description ?? "-")])
        }
        let credentials = allowed ? profile?.credentials.map { WireErrorCredentialSource(base: $0) } : nil
        let configuration = EventSourceConfiguration(
            request: request, lastEventID: params.lastEventID, credentials: credentials,
            idleTimeout: environment.settings.events.idleTimeout, maxBackoff: environment.settings.events.maxBackoff,
            connectTimeout: params.timeout ?? environment.settings.connectTimeout)
        let source = EventSource(transport: environment.transport, configuration: configuration)

        let notifier = Notifier(context: context)
        let replyHandedOver = context.replyHandedOver
        // Registered under the lock only while `runtime` is still the current one: a reload
        // swaps the runtime and picks the subscriptions to close under the same lock.
        let id: String? = try state.withLock { table in
            guard !table.closing else { throw RPCError.shuttingDown }
            guard runtimes.current === runtime else { return nil }
            defer { table.nextID += 1 }
            let id = "sub-\(table.nextID)"
            let task = Task.detached { [self] in
                // The reply carrying the id goes out before any notification of the subscription.
                await replyHandedOver.wait()
                await Self.pump(source, id: id, notifier: notifier)
                state.withLock { _ = $0.active.removeValue(forKey: id) }
            }
            table.active[id] = Entry(task: task, environment: environment.name, profile: profile?.name)
            return id
        }
        guard let id else { return nil }
        return ["subscription": .string(id)]
    }

    /// Makes `runtime` the current one and closes the subscriptions whose environment or profile
    /// `diff` does not keep (each sends its final `closed` state); returns once they are closed.
    func replaceRuntime(with runtime: RelayRuntime, diff: SettingsDiff) async {
        let tasks = state.withLock { state in
            runtimes.replace(with: runtime)
            let ending = state.active.filter {
                !diff.keeps(environment: $0.value.environment, profile: $0.value.profile)
            }
            for id in ending.keys { state.active[id] = nil }
            return ending.values.map(\.task)
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// Closes the subscription `id` (``UnsubscribeMethod``).
    func unsubscribe(id: String) async throws -> JSONValue {
        guard let task = state.withLock({ $0.active.removeValue(forKey: id)?.task }) else {
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
        let tasks = state.withLock { state in
            state.closing = true
            defer { state.active = [:] }
            return state.active.values.map(\.task)
        }
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
                var params: JSONObject = ["subscription": .string(id)]
                if let lastEventID = event.lastEventID { params["id"] = .string(lastEventID) }
                params["event"] = .string(event.type)
                params["data"] = .string(event.data)
                if let retry = event.retry { params["retry"] = .int(retry) }
                await notifier.notify("event", .object(params))
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

    static func stateParams(_ change: SubscriptionStateChange, id: String) -> JSONValue {
        var params: JSONObject = ["subscription": .string(id), "state": .string(change.state.rawValue)]
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

/// Passes credential errors on with their wire kind (through the one error mapping), so a
/// subscription closed by a refused token says `auth`, `interaction_required`, `config`...
struct WireErrorCredentialSource: CredentialSource {
    struct Failure: KindedError, CustomStringConvertible {
        let errorKind: ErrorKind
        let description: String
    }

    let base: any CredentialSource

    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        do {
            return try await base.apply(to: &request)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            let mapped = ErrorMapping.rpcError(error)
            throw Failure(errorKind: mapped.kind, description: mapped.message)
        }
    }

    var isRenewable: Bool { base.isRenewable }

    func invalidate(stamp: CredentialStamp) async throws {
        try await base.invalidate(stamp: stamp)
    }
}

extension Notifier {
    /// A notifier writing through the same sink as `context`.
    init(context: RequestContext) {
        self.init(sink: context.sink)
    }
}
