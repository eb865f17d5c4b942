import Config
import HTTP
import JSONRPC

/// The one-shot commands for shell users (`tokenrelay call`), using the same runtime as the
/// server without the JSON-RPC layer.
public enum OneShot {
    /// Sends one request described by `request` params (as the `request` method takes them).
    /// Returns the response, or the wire error it would have produced.
    public static func call(settings: Settings, environment: String?, params: JSONValue) async -> Result<
        (response: HTTPResponse, elapsed: Duration), RPCError
    > {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(settings: settings, environmentOverride: environment)
        } catch {
            return .failure(ErrorMapping.rpcError(error))
        }
        let result: Result<(response: HTTPResponse, elapsed: Duration), RPCError>
        do {
            let decoded = try RequestParams.decode(params)
            let (response, elapsed) = try await RequestMethod(runtime: runtime).perform(decoded)
            result = .success((response, elapsed))
        } catch {
            result = .failure(ErrorMapping.rpcError(error))
        }
        await runtime.close()
        return result
    }
}
