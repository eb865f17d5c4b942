import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayPlatform

/// The runtime `serve` and the one-shot commands use, held open for a program that links
/// tokenrelay (the `TokenRelay` module's client). Not a stable API: the `TokenRelay` module is.
@_spi(TokenRelay) public final class RelaySession: Sendable {
    private let runtime: RelayRuntime
    /// Reads the token manager's events for the session's lifetime and hands login prompts to
    /// ``promptHandler``.
    private let events: Task<Void, Never>
    /// Who gets the prompts of the login in progress.
    private let promptHandler = PromptHandler()

    private init(runtime: RelayRuntime) {
        self.runtime = runtime
        let handler = promptHandler
        events = Placement.task {
            for await event in runtime.manager.events {
                guard case .prompt(let prompt) = event, let handle = handler.current.withLock({ $0 }) else {
                    continue
                }
                handle(LoginMethod.promptParams(prompt))
            }
        }
    }

    /// Opens a session on `settings`; `environment` overrides the default environment.
    public static func open(settings: Settings, environment: String?) async throws(RPCError) -> RelaySession {
        if let environment, settings.environment(named: environment) == nil {
            throw RPCError(
                code: .unknownEnvironment,
                message: RelayRuntime.unknown("environment", environment, known: settings.environments.map(\.name)))
        }
        do {
            return RelaySession(
                runtime: try await RelayRuntime.make(settings: settings, environmentOverride: environment))
        } catch {
            throw ErrorMapping.rpcError(error)
        }
    }

    /// One request, described by `request` params as the method takes them.
    public func request(_ params: JSONValue) async throws(RPCError) -> HTTPResponse {
        do {
            let decoded = try RequestParams.decode(params)
            return try await RequestMethod(runtime: runtime).perform(decoded).0
        } catch {
            throw ErrorMapping.rpcError(error)
        }
    }

    /// The access token of a profile with `expose_token: true`, valid for `minimumValidity`.
    public func token(environment: String?, profile: String?, minimumValidity: Duration?) async throws(RPCError)
        -> Token
    {
        do {
            let methods = TokenMethods(runtime: runtime, subscriptionCount: { 0 })
            return try await methods.issue(
                environment: environment, profile: profile,
                minimumValidity: minimumValidity ?? TokenMethods.defaultMinimumValidity
            ).token
        } catch {
            throw ErrorMapping.rpcError(error)
        }
    }

    /// Logs in to an interactive profile; `onPrompt` gets the `auth-prompt` params (`{url,
    /// userCode?, ...}`). Returns the `login` result once the session is stored.
    public func login(
        environment: String?, profile: String?, openBrowser: Bool, onPrompt: @escaping @Sendable (JSONValue) -> Void
    ) async throws(RPCError) -> JSONValue {
        promptHandler.current.withLock { $0 = onPrompt }
        defer { promptHandler.current.withLock { $0 = nil } }
        do {
            let method = LoginMethod(runtime: runtime)
            let (environmentRuntime, profileRuntime) = try method.session(environment: environment, profile: profile)
            let login = try await method.perform(
                environment: environmentRuntime, profile: profileRuntime, openBrowser: openBrowser)
            return LoginMethod.Result(login, environment: environmentRuntime.name, profile: profileRuntime.name)
                .resultValue
        } catch {
            throw ErrorMapping.rpcError(error)
        }
    }

    /// Closes the runtime: its transfers, its store.
    public func close() async {
        await runtime.close()
        events.cancel()
    }
}

/// The prompt handler of a ``RelaySession``'s login in progress.
private final class PromptHandler: Sendable {
    /// Guarded by the mutex.
    let current = Mutex<(@Sendable (JSONValue) -> Void)?>(nil)
}
