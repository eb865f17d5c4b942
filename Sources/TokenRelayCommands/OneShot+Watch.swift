import TokenRelayAuth
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayPlatform
import TokenRelayServer

extension OneShot {
    /// `tokenrelay status --watch` (SPEC §13.1): the `watch-sessions` answer (`{sessions}`), then
    /// each `session-changed` notification's params, handed to `onLine` as they come, until
    /// `handle` is stopped (SIGINT/SIGTERM). What it reports is the token manager's session
    /// events, the other processes' changes seen through the store; never a token value.
    public static func watchSessions(
        settings: Settings, environment: String?, handle: SubscriptionHandle,
        onLine: @escaping @Sendable (JSONValue) -> Void
    ) async -> RPCError? {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(settings: settings, environmentOverride: environment)
        } catch {
            return ErrorMapping.rpcError(error)
        }
        let manager = runtime.manager
        // Subscribed before the watch starts: no change after the baseline is missed, and none
        // is printed before it.
        let baseline = OneShotSignal()
        let events = Placement.task {
            for await event in manager.events {
                await baseline.wait()
                if case .sessionChanged(let change) = event {
                    onLine(WatchSessionsMethod.changeParams(change))
                }
            }
        }
        await manager.watchSessions()
        do {
            let status = try await TokenMethods(runtime: runtime, subscriptionCount: { 0 }).status()
            onLine(WatchSessionsMethod.answer(status))
            baseline.fire()
        } catch {
            events.cancel()
            await runtime.close()
            return ErrorMapping.rpcError(error)
        }
        await handle.finished.wait()
        events.cancel()
        await runtime.close()
        return nil
    }
}
