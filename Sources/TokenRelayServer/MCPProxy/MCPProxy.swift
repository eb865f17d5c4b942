import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// `tokenrelay mcp-proxy` (SPEC §9.6): a stdio MCP server that forwards every message to a remote
/// MCP server over Streamable HTTP with the session's token. Messages go on unchanged; the
/// client sees only the server's messages and, for a request that could not be delivered, a
/// JSON-RPC error answer to it. Tokens never reach the client, stdout or stderr.
public enum MCPProxy {
    /// The profile name of the implicit configuration.
    public static let implicitProfile = "mcp"

    /// The settings of `tokenrelay mcp-proxy URL` without a config: one environment for the URL
    /// (named by its canonical form, so every proxy of that server shares its sessions), a
    /// discovered `authorization_code` profile registering itself, the default store.
    public static func implicitSettings(url: String, openBrowser: Bool, store: StoreSettings = StoreSettings())
        -> Settings
    {
        let name = ResourceIdentifier.canonical(url) ?? url
        var client = OAuthClientSettings(clientID: "")
        client.discovery = DiscoverySettings()
        let login = InteractiveLoginSettings(openBrowser: openBrowser ? .system : .off)
        let profile = ProfileSettings(
            name: implicitProfile, typeName: "authorization_code", kind: .authorizationCode(client, login))
        let environment = EnvironmentSettings(
            name: name, baseURL: url, defaultProfile: implicitProfile, profiles: [profile])
        return Settings(defaultEnvironment: name, environments: [environment], store: store)
    }

    /// Relays the messages of `input` (one JSON-RPC message per element) until it ends (the end
    /// of stdin, a stopping signal, the peer gone), writing the server's messages to `output`
    /// (waiting for room while the client does not read) and login prompts with `notice`. Once
    /// the input has ended, what the client has not read within `gracePeriod` (and the allowance
    /// `serve` gives its cancelled requests' answers) is abandoned, as `serve` does
    /// (``RelayServer/boundOutput(_:gracePeriod:)``). Returns nil, or the error that kept it from
    /// starting. At most `flights.limit` messages are forwarded at once (the reader of `input`
    /// asks ``MCPProxyFlights/hasRoom(orWhenRoom:)`` before each read).
    public static func run(
        settings: Settings, environment: String?, profile: String?, openBrowser: Bool,
        input: AsyncStream<[UInt8]>, output: StdioWriter, flights: MCPProxyFlights, gracePeriod: Duration,
        notice: @escaping @Sendable (String) -> Void
    ) async -> RPCError? {
        let runtime: RelayRuntime
        do {
            runtime = try await RelayRuntime.make(
                settings: settings, environmentOverride: environment)
        } catch {
            return ErrorMapping.rpcError(error)
        }
        let connection: MCPProxyConnection
        do {
            let environmentRuntime = try runtime.environment(nil)
            guard let profileRuntime = try runtime.profile(profile, in: environmentRuntime),
                profileRuntime.credentials != nil
            else {
                throw RPCError(code: .unknownProfile, message: "the environment has no usable profile")
            }
            let client = environmentRuntime.forwardingClient(
                for: profileRuntime,
                logIn: { try await logIn(runtime: runtime, profile: profileRuntime, openBrowser: openBrowser) })
            connection = MCPProxyConnection(
                client: client, endpoint: environmentRuntime.settings.baseURL,
                maxResponseBytes: environmentRuntime.settings.maxResponseBytes, flights: flights,
                output: { await output.send($0) })
        } catch {
            await runtime.close()
            return ErrorMapping.rpcError(error)
        }
        let prompts = Placement.task {
            for await event in runtime.manager.events {
                if case .prompt(let prompt) = event {
                    notice("tokenrelay: to log in to \(prompt.environment), open \(prompt.url)")
                }
            }
        }
        await withDiscardingTaskGroup { group in
            for await message in input {
                // A notification is forwarded in order, before the next message is read: the
                // server sees `notifications/initialized`, and answers the GET stream it opens,
                // before any later request.
                if let parsed = MCPMessage(message), parsed.method != nil, parsed.id == nil {
                    await connection.forward(message)
                    continue
                }
                await flights.begin()
                group.addTask(executorPreference: Placement.ownTasks) {
                    await connection.forward(message)
                    flights.end()
                }
            }
            RelayServer.boundOutput(output, gracePeriod: gracePeriod)
            group.cancelAll()
        }
        connection.stopServerStream()
        await connection.endSession()
        prompts.cancel()
        await runtime.close()
        await output.finish()
        return nil
    }

    /// The forwarding policy's login (SPEC §9.6): the person logs in to the profile's session
    /// (joining a login in progress in this or another process); a refused code exchange drops a
    /// discovered profile's registration, so the next attempt registers again.
    static func logIn(runtime: RelayRuntime, profile: ProfileRuntime, openBrowser: Bool) async throws {
        guard profile.typeName == "authorization_code" || profile.typeName == "device_code" else {
            throw AuthError.interactionRequired("the profile needs a login but is not interactive")
        }
        let key: SessionKey
        if let session = profile.session {
            key = session
        } else if let discovery = profile.discovery {
            key = try await discovery.key()
        } else {
            throw AuthError.interactionRequired("the profile has no session")
        }
        do {
            _ = try await runtime.manager.login(key, openBrowser: openBrowser)
        } catch let error as AuthError where error.oauthError != nil {
            await profile.discovery?.tokenRequestRefused(error)
            throw error
        }
    }
}
