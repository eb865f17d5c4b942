import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

extension OneShot {
    /// `tokenrelay status`: the `status` method's result in a process of its own (what the store
    /// holds for each configured session).
    public static func status(settings: Settings, environment: String?) async
        -> Result<JSONValue, RPCError>
    {
        await withTokenMethods(settings: settings, environment: environment) {
            try await $0.status().resultValue
        }
    }

    /// `tokenrelay logout`: the `logout` method (params `{environment?, profile?, all?}`) in a
    /// process of its own; the sessions are removed from the store, so every process sees it.
    /// `forgetKey` (`--all --forget-key`): then the secret service's key of the store is removed
    /// (`forgotten` in the result says what was done).
    public static func logout(
        settings: Settings, environment: String?, params: JSONValue, forgetKey: Bool = false
    ) async -> Result<JSONValue, RPCError> {
        await withTokenMethods(settings: settings, environment: environment) { methods in
            var result = try await methods.logout(try SessionSelection(decoding: params)).resultValue
            if forgetKey, case .object(var object) = result {
                object["forgotten"] = .string(try await methods.runtime.manager.forgetStoreKey())
                result = .object(object)
            }
            return result
        }
    }

    /// `tokenrelay invalidate`: the `token-invalidate` method (params `{environment?, profile?, all?}`)
    /// in a process of its own; the invalidation is recorded in the store, so every process sharing
    /// it renews on its next use (refresh state is kept).
    public static func invalidate(
        settings: Settings, environment: String?, params: JSONValue
    ) async -> Result<JSONValue, RPCError> {
        await withTokenMethods(settings: settings, environment: environment) {
            try await $0.invalidate(try SessionSelection(decoding: params)).resultValue
        }
    }

    /// `tokenrelay store rekey`: re-seals every record of the configured SQLite store under
    /// `newKey` (base64 or hex of 32 bytes) in one transaction, once no renewal is under way in
    /// any process (`waiting` is told of each it waits for).
    public static func rekeyStore(
        settings: Settings, newKey: NewStoreKey, waiting: @escaping @Sendable (String) -> Void = { _ in }
    ) async -> Result<(path: String, notes: [String]), RPCError> {
        guard let store = RelayRuntime.makeStore(settings.store) as? SQLiteTokenStore else {
            return .failure(RPCError(code: .config, message: "the store is not SQLite: nothing to re-seal"))
        }
        do {
            let notes = try await store.rekey(to: newKey, waiting: waiting)
            return .success((store.path, notes))
        } catch {
            return .failure(ErrorMapping.rpcError(error))
        }
    }

    /// A fresh random store key, base64 (`tokenrelay store new-key`).
    public static func newStoreKey() -> String? { SQLiteTokenStore.newKey() }

    private static func withTokenMethods(
        settings: Settings, environment: String?,
        _ body: (TokenMethods) async throws -> JSONValue
    ) async -> Result<JSONValue, RPCError> {
        await withRuntime(settings: settings, environment: environment) { runtime in
            try await body(TokenMethods(runtime: runtime, subscriptionCount: { 0 }))
        }
    }
}
