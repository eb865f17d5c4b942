import Synchronization
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

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
    /// `handle` is stopped. State changes are logged on stderr.
    public static func subscribe(
        settings: Settings, environment: String?, params: JSONValue, handle: SubscriptionHandle,
        onEvent: @escaping @Sendable (JSONValue) -> Void
    ) async -> SubscriptionEnd {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(
                settings: settings, environmentOverride: environment)
        } catch {
            return .failed(ErrorMapping.rpcError(error))
        }
        let sink = CallbackSink(onEvent: onEvent, finished: handle.finished)
        let subscriptions = Subscriptions(runtime: runtime)
        let context = RequestContext(id: .number(JSONNumber(1)), inBatch: false, sink: sink)
        do {
            _ = try await subscriptions.subscribe(
                try SubscribeMethod.decode(params, context: context), context: context)
        } catch {
            await runtime.close()
            return .failed(ErrorMapping.rpcError(error))
        }
        context.replyHandedOver.fire()
        await handle.finished.wait()
        await subscriptions.closeAll()
        await runtime.close()
        return handle.wasStopped ? .stopped : sink.end
    }

    /// Turns the subscription's notifications into callbacks and log lines.
    private final class CallbackSink: MessageSink {
        let onEvent: @Sendable (JSONValue) -> Void
        let closed: OneShotSignal
        private let ending = Mutex<SubscriptionEnd>(.closed(status: nil, error: nil))

        init(onEvent: @escaping @Sendable (JSONValue) -> Void, finished: OneShotSignal) {
            self.onEvent = onEvent
            closed = finished
        }

        var end: SubscriptionEnd { ending.withLock { $0 } }

        func send(_ message: consuming [UInt8]) async { sendNow(message) }

        func sendNow(_ message: consuming [UInt8]) {
            guard let value = try? JSONParser.parse(message), var params = value["params"]?.objectValue else { return }
            params["subscription"] = nil
            switch value["method"]?.stringValue {
            case "event":
                onEvent(.object(params))
            case "subscription-state":
                let state = params["state"]?.stringValue ?? "?"
                log.info(
                    "subscription \(state)",
                    params.members.filter { $0.key != "state" }.map { ($0.key, $0.value.jsonText) })
                if state == "closed" {
                    let error = params["error"].map { error in
                        EventSourceFailure(
                            kind: error["kind"]?.stringValue.flatMap(ErrorKind.init(rawValue:)) ?? .transport,
                            message: error["message"]?.stringValue ?? "closed")
                    }
                    let status = params["status"]?.numberValue?.intValue
                    ending.withLock { $0 = .closed(status: status, error: error) }
                    closed.fire()
                }
            default:
                break
            }
        }
    }
}
