import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

extension OneShot {
    /// How a one-shot subscription ended.
    public enum SubscriptionEnd: Sendable {
        /// Stopped by ``SubscriptionHandle/stop()`` (SIGINT/SIGTERM).
        case stopped
        /// The server ended it; `error` (the `subscription-state` notification's `{kind, message}`)
        /// is set when it ended on an error.
        case closed(status: Int?, error: EventSourceFailure?)
        /// It could not start.
        case failed(RPCError)
    }

    /// Lets the caller stop a running one-shot subscription.
    public final class SubscriptionHandle: Sendable {
        /// Fires when the subscription should end: stopped by the caller or closed by the server.
        let finished = OneShotSignal()
        private let stopped = Mutex(false)
        public init() {}
        /// Stops the subscription; ``subscribe(settings:environment:params:handle:onEvent:)`` returns.
        public func stop() {
            stopped.withLock { $0 = true }
            finished.fire()
        }
        var wasStopped: Bool { stopped.withLock { $0 } }
    }

    /// Follows one event stream (params as `subscribe` takes them), calling `onEvent` with each
    /// `event` notification's params (without `subscription`), until the stream closes or
    /// `handle` is stopped. State changes are logged on stderr. The stream is the `subscribe`
    /// method's (``Subscriptions/source(_:runtime:)``), read here without notifications.
    public static func subscribe(
        settings: Settings, environment: String?, params: JSONValue, handle: SubscriptionHandle,
        onEvent: @escaping @Sendable (JSONValue) -> Void
    ) async -> SubscriptionEnd {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(settings: settings, environmentOverride: environment)
        } catch {
            return .failed(ErrorMapping.rpcError(error))
        }
        let source: EventSource
        do {
            source = try await Subscriptions.source(try RequestParams.decodeSubscription(params), runtime: runtime)
                .source
        } catch {
            await runtime.close()
            return .failed(ErrorMapping.rpcError(error))
        }
        let ending = Mutex<SubscriptionEnd>(.closed(status: nil, error: nil))
        let stream = Placement.task {
            for await update in source {
                switch update {
                case .event(let event):
                    onEvent(.object(Subscriptions.eventParams(event, id: nil)))
                case .state(let change):
                    let fields = Subscriptions.stateParams(change, id: nil).objectValue?.members ?? []
                    log.info(
                        "subscription \(change.state.rawValue)",
                        fields.filter { $0.key != "state" }.map { ($0.key, $0.value.jsonText) })
                    if change.state == .closed {
                        let error = change.error.map {
                            EventSourceFailure(kind: $0.kind, message: Redactor.shared.redact($0.message))
                        }
                        ending.withLock { $0 = .closed(status: change.status, error: error) }
                    }
                }
            }
            handle.finished.fire()
        }
        await handle.finished.wait()
        stream.cancel()
        await stream.value
        await runtime.close()
        return handle.wasStopped ? .stopped : ending.withLock { $0 }
    }
}
