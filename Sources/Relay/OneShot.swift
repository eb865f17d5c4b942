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
        do {
            let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: environment)
            defer { Task { await runtime.close() } }
            let decoded = try RequestParams.decode(params)
            let (response, elapsed) = try await RequestMethod(runtime: runtime).perform(decoded)
            return .success((response, elapsed))
        } catch {
            return .failure(ErrorMapping.rpcError(error))
        }
    }
}
