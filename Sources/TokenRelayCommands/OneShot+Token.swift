import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayServer

extension OneShot {
    /// `tokenrelay token`: the token of `profile` in `environment` (or the defaults) as
    /// `format` renders it, through the same path as the `token-get` method. `execInfo` is
    /// `KUBERNETES_EXEC_INFO`, which picks the ExecCredential version.
    public static func token(
        settings: Settings, environment: String?, profile: String?, format: TokenFormat,
        minimumValidity: Duration?, execInfo: String?
    ) async -> Result<String, RPCError> {
        await withRuntime(settings: settings, environment: environment) { runtime in
            let methods = TokenMethods(runtime: runtime, subscriptionCount: { 0 })
            let version = format == .execCredential ? try ExecCredentialVersion.fromExecInfo(execInfo) : .v1
            let issued = try await methods.issue(
                environment: nil, profile: profile,
                minimumValidity: minimumValidity ?? TokenMethods.defaultMinimumValidity)
            return format.text(issued.token, version: version)
        }
    }

    /// `tokenrelay token --format git ACTION`: one git credential-helper operation on `input`
    /// (what git wrote on stdin). Returns what to print (often nothing).
    public static func gitCredential(
        settings: Settings, environment: String?, profile: String?, action: String, minimumValidity: Duration?,
        input: [UInt8]
    ) async -> Result<String, RPCError> {
        await withRuntime(settings: settings, environment: nil) { runtime in
            let methods = TokenMethods(runtime: runtime, subscriptionCount: { 0 })
            let request = try GitCredentialRequest.parse(input)
            return try await methods.gitCredential(
                action: action, request: request, environment: environment, profile: profile,
                minimumValidity: minimumValidity ?? TokenMethods.defaultMinimumValidity)
        }
    }
}
