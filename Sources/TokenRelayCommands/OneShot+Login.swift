import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

extension OneShot {
    /// What a one-shot login gives.
    public struct LoginOutcome: Sendable {
        /// The `login` result.
        public let result: JSONValue
        /// Whether the session outlives this process (false with `store: {type: memory}`).
        public let persisted: Bool
    }

    /// Logs in to one interactive profile (`tokenrelay login`): `onPrompt` gets the `auth-prompt`
    /// params; returns once the session is stored. With `pasted` (`--paste`, SPEC §13.2), each URL
    /// it yields is handed to the login as `login-complete` would, and `onPasted` gets why one was
    /// refused (`nil`: accepted); the loopback listener keeps waiting meanwhile.
    public static func login(
        settings: Settings, environment: String?, profile: String?, openBrowser: Bool,
        pasted: AsyncStream<String>? = nil, onPasted: @escaping @Sendable (String?) -> Void = { _ in },
        onPrompt: @escaping @Sendable (JSONValue) -> Void
    ) async -> Result<LoginOutcome, RPCError> {
        await withRuntime(settings: settings, environment: environment) { runtime in
            let prompts = Placement.task {
                for await event in runtime.manager.events {
                    if case .prompt(let prompt) = event { onPrompt(LoginMethod.promptParams(prompt)) }
                }
            }
            defer { prompts.cancel() }
            let pastes = pasted.map { pasted in
                Placement.task {
                    for await url in pasted {
                        do {
                            _ = try await LoginCompleteMethod.complete(
                                runtime: runtime, environment: nil, profile: profile, url: url)
                            onPasted(nil)
                        } catch {
                            onPasted(ErrorMapping.rpcError(error).message)
                        }
                    }
                }
            }
            defer { pastes?.cancel() }
            let method = LoginMethod(runtime: runtime)
            let (environmentRuntime, profileRuntime) = try method.session(environment: nil, profile: profile)
            let login = try await method.perform(
                environment: environmentRuntime, profile: profileRuntime, openBrowser: openBrowser)
            return LoginOutcome(
                result: LoginMethod.Result(login, environment: environmentRuntime.name, profile: profileRuntime.name)
                    .resultValue,
                persisted: settings.store.type != .memory)
        }
    }
}
