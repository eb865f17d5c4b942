import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

/// The one-shot commands for shell users (`tokenrelay call`), using the same runtime as the
/// server without the JSON-RPC layer. Where their work runs is ``Placement``'s to say.
public enum OneShot {
    /// Sends one request described by `request` params (as the `request` method takes them).
    /// Returns the response, or the wire error it would have produced. `libraries`: the loads
    /// the caller started (``CallLibraries/startLoading()``), which proceed once the request's
    /// profile is known.
    public static func call(
        settings: Settings, environment: String?, params: JSONValue, libraries: CallLibraries? = nil
    ) async -> Result<(response: HTTPResponse, elapsed: Duration), RPCError> {
        await withRuntime(settings: settings, environment: environment) { runtime in
            let decoded = try RequestParams.decode(params)
            if let libraries { await proceed(libraries, runtime: runtime, params: decoded) }
            let (response, elapsed) = try await RequestMethod(runtime: runtime).perform(decoded)
            return (response, elapsed)
        }
    }

    /// Runs `body` on a runtime built from `settings` (`environment` overriding the default
    /// environment), closing it afterwards; every error comes back as the wire error it would
    /// have been.
    static func withRuntime<Value>(
        settings: Settings, environment: String?,
        _ body: (RelayRuntime) async throws -> Value
    ) async -> Result<Value, RPCError> {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(
                settings: settings, environmentOverride: environment)
        } catch {
            return .failure(ErrorMapping.rpcError(error))
        }
        let result: Result<Value, RPCError>
        do {
            result = .success(try await body(runtime))
        } catch {
            result = .failure(ErrorMapping.rpcError(error))
        }
        await runtime.close()
        return result
    }
}
