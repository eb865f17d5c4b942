import Synchronization
import TokenRelayAuth
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// The runtime the methods use, swappable by a configuration reload. Each method call reads it
/// once at its start (``use(_:)``) and keeps that runtime to its end, so an in-flight request
/// finishes with the configuration it started with. A runtime replaced by a reload is retired:
/// once its last call ends, the sessions and transports no live runtime uses any more are
/// dropped (a removed environment's transport is shut down after its last request).
final class CurrentRuntime: TransferLoops {
    private struct State {
        var current: RelayRuntime
        /// Calls running per runtime (current and retired).
        var calls: [ObjectIdentifier: Int] = [:]
        /// Replaced runtimes that still have calls running.
        var retired: [ObjectIdentifier: RelayRuntime] = [:]
        var closed = false
    }

    /// Guarded by the mutex.
    private let state: Mutex<State>

    init(_ runtime: RelayRuntime) {
        state = Mutex(State(current: runtime))
    }

    /// The runtime new calls use.
    var current: RelayRuntime { state.withLock { $0.current } }

    /// The current runtime's loop of environment `name` (``RelayRuntime/loop(forEnvironment:)``).
    func loop(forEnvironment name: String?) -> (any TaskExecutor)? { current.loop(forEnvironment: name) }

    /// Runs `body` with the current runtime, which stays alive (its sessions and transports) until
    /// `body` returns.
    func use<T>(_ body: (RelayRuntime) async throws -> T) async throws -> T {
        let runtime = state.withLock { state in
            state.calls[ObjectIdentifier(state.current), default: 0] += 1
            return state.current
        }
        defer { release(runtime) }
        return try await body(runtime)
    }

    /// Makes `runtime` the current one; the previous one is retired (and cleaned up at once when
    /// no call is running on it).
    func replace(with runtime: RelayRuntime) {
        let previous = state.withLock { state in
            defer { state.current = runtime }
            state.retired[ObjectIdentifier(state.current)] = state.current
            return state.current
        }
        // The reload itself counts as a call on the previous runtime until this returns.
        state.withLock { $0.calls[ObjectIdentifier(previous), default: 0] += 1 }
        release(previous)
    }

    private func release(_ runtime: RelayRuntime) {
        let id = ObjectIdentifier(runtime)
        let cleanup: (drop: [LazyTransport], keep: Set<SessionKey>, environments: Set<String>)? = state.withLock {
            state in
            let left = (state.calls[id] ?? 1) - 1
            state.calls[id] = left == 0 ? nil : left
            guard left == 0, let retired = state.retired.removeValue(forKey: id), !state.closed else { return nil }
            let live = [state.current] + Array(state.retired.values)
            let kept = Set(live.flatMap { $0.transports.map(ObjectIdentifier.init) })
            return (
                retired.transports.filter { !kept.contains(ObjectIdentifier($0)) },
                live.reduce(into: Set<SessionKey>()) { $0.formUnion($1.sessionKeys) },
                Set(live.flatMap(\.environmentTransports.keys))
            )
        }
        guard let cleanup else { return }
        let manager = runtime.manager
        Placement.task {
            let removed = await manager.removeSessions(except: cleanup.keep)
            manager.dropTransports(except: cleanup.environments)
            for transport in cleanup.drop { transport.shutdown() }
            if removed > 0 || !cleanup.drop.isEmpty {
                log.debug(
                    "reload: dropped \(removed) session(s) and \(cleanup.drop.count) transport(s) no longer configured")
            }
        }
    }

    /// Stops the token manager (after letting pending token commits settle) and every transport
    /// of every runtime still alive.
    func close() async {
        let live = state.withLock { state in
            state.closed = true
            return [state.current] + Array(state.retired.values)
        }
        await live[0].close()
        let closed = Set(live[0].transports.map(ObjectIdentifier.init))
        for transport in live.dropFirst().flatMap(\.transports) where !closed.contains(ObjectIdentifier(transport)) {
            transport.shutdown()
        }
    }
}
