import FoundationEssentials
import Glibc
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform

/// Everything the methods need, built from the settings: one transport and runtime per
/// environment, and the token manager holding every OAuth session. A configuration reload
/// builds a new one from the previous one (``make(settings:environmentOverride:testLeaseGate:reusing:)``):
/// the manager persists, and unchanged environments and profiles are carried over as they are.
package final class RelayRuntime: Sendable {
    let settings: Settings
    /// `--env`, which overrides the config's `default_environment`.
    let environmentOverride: String?
    package let manager: TokenManager
    let environments: [String: EnvironmentRuntime]
    /// The transport of each environment.
    let environmentTransports: [String: LazyTransport]
    /// The transport of sessions of no environment (never created in practice: transports are lazy).
    let defaultTransport: LazyTransport

    private init(
        settings: Settings, environmentOverride: String?, manager: TokenManager,
        environments: [String: EnvironmentRuntime], environmentTransports: [String: LazyTransport],
        defaultTransport: LazyTransport
    ) {
        self.settings = settings
        self.environmentOverride = environmentOverride
        self.manager = manager
        self.environments = environments
        self.environmentTransports = environmentTransports
        self.defaultTransport = defaultTransport
    }

    /// Every transport this runtime sends through.
    var transports: [LazyTransport] { [defaultTransport] + environmentTransports.values }

    /// The token-manager sessions this runtime's profiles use.
    var sessionKeys: Set<SessionKey> {
        Set(environments.values.flatMap { $0.profiles.values.compactMap(\.session) })
    }

    /// Builds the runtime. Fails (kind `config`) when a profile's settings cannot work.
    /// `testLeaseGate` (end-to-end tests only): a FIFO every renewal waits on, after taking its
    /// lease, until something is written to it. With `previous` (a reload), the previous
    /// runtime's manager is kept, and so are the transports and profiles that `diff` keeps;
    /// changed OAuth profiles start afresh (their held access token is not used again).
    package static func make(
        settings: Settings, environmentOverride: String?, testLeaseGate: String? = nil,
        reusing previous: (runtime: RelayRuntime, diff: SettingsDiff)? = nil
    ) async throws -> RelayRuntime {
        func transport(for environment: EnvironmentSettings?) -> LazyTransport {
            var options = CurlTransport.Options()
            // A paused subscription holds at most this much: 1,000 of them stay well under 100 MB.
            options.streamBufferBytes = 32 << 10
            // As many connections stay open as requests may run at once.
            options.keptConnections = settings.server.maxConcurrentRequests
            if let environment {
                options.caFile = environment.caFile
                options.proxy = environment.proxy
                options.maxResponseBytes = environment.maxResponseBytes
                options.connectTimeout = environment.connectTimeout
                options.streamIdleTimeout = environment.events.idleTimeout
            }
            return LazyTransport(options: options)
        }
        // One transport per environment carries both its API traffic (through the middlewares)
        // and its profiles' token, discovery and revocation traffic (without them), so both use
        // the environment's ca_file, proxy and connect_timeout (SPEC §5.2). Sessions of no
        // environment do not exist; the default is never created (transports are lazy).
        var environmentTransports: [String: LazyTransport] = [:]
        var madeTransports: [String: LazyTransport] = [:]
        for environment in settings.environments where environmentTransports[environment.name] == nil {
            if let previous, !previous.diff.replacedEnvironments.contains(environment.name),
                let kept = previous.runtime.environmentTransports[environment.name]
            {
                environmentTransports[environment.name] = kept
            } else {
                let made = transport(for: environment)
                environmentTransports[environment.name] = made
                madeTransports[environment.name] = made
            }
        }
        let manager: TokenManager
        let defaultTransport: LazyTransport
        if let previous {
            // Checked before anything is registered: a reload that fails changes nothing.
            for environment in settings.environments {
                for profile in environment.profiles
                where !previous.diff.keeps(environment: environment.name, profile: profile.name) {
                    try oauthConfigurationProblem(profile, in: environment)
                }
            }
            manager = previous.runtime.manager
            defaultTransport = previous.runtime.defaultTransport
            manager.useTransports(madeTransports.mapValues { $0 })
        } else {
            defaultTransport = transport(for: nil)
            manager = TokenManager(
                transport: defaultTransport, environmentTransports: environmentTransports.mapValues { $0 },
                store: makeStore(settings.store), afterLease: testLeaseGate.map(Self.fifoGate))
        }
        var environments: [String: EnvironmentRuntime] = [:]
        for environment in settings.environments {
            guard let transport = environmentTransports[environment.name] else { continue }
            var kept: [String: ProfileRuntime] = [:]
            if let previous, let before = previous.runtime.environments[environment.name] {
                for (name, profile) in before.profiles
                where previous.diff.keeps(environment: environment.name, profile: name) {
                    kept[name] = profile
                }
            }
            environments[environment.name] = try await EnvironmentRuntime.make(
                environment, manager: manager, transport: transport, keeping: kept)
        }
        if let previous {
            for entry in previous.diff.changed {
                guard let profile = entry.profile,
                    environments[entry.environment]?.profiles[profile]?.session != nil
                else { continue }
                await manager.invalidate(environment: entry.environment, profile: profile)
            }
        }
        return RelayRuntime(
            settings: settings, environmentOverride: environmentOverride, manager: manager, environments: environments,
            environmentTransports: environmentTransports, defaultTransport: defaultTransport)
    }

    /// Throws what registering `profile` would throw (its OAuth client configuration is invalid).
    private static func oauthConfigurationProblem(_ profile: ProfileSettings, in environment: EnvironmentSettings)
        throws
    {
        do {
            try ProfileRuntime.oauthConfiguration(profile, in: environment)?.validate()
        } catch {
            // ErrorMapping turns the error into the wire error (its kind, redacted); the message names the profile.
            var mapped = ErrorMapping.rpcError(error)
            mapped.message = "profile '\(profile.name)' of environment '\(environment.name)': " + mapped.message
            throw mapped
        }
    }

    /// The configured token store (opened on first use).
    package static func makeStore(_ settings: StoreSettings) -> any TokenStore {
        switch settings.type {
        case .memory:
            return InMemoryTokenStore()
        case .sqlite:
            let path = settings.path ?? StoreSettings.defaultPath(environment: ProcessEnvironment.current())
            let key = settings.encryptionKey.map { source in SecretProvider { try await source.resolve() } }
            let source: StoreKeySource
            switch (key, settings.key) {
            case (let key?, _): source = .configured(key)
            case (nil, .automatic): source = .secretService(required: false)
            case (nil, .keyring): source = .secretService(required: true)
            case (nil, .none): source = .none
            }
            let host = SQLiteTokenStore(path: path, key: source)
            guard let shared = settings.shared, let key else { return host }
            let password = shared.password.map { source in SecretProvider { try await source.resolve() } }
            let tier = PostgresSharedTier(
                configuration: PostgresTierConfiguration(
                    url: shared.url, password: password, timeout: shared.timeout, schema: shared.schema))
            return SharedTierStore(host: host, tier: tier, encryptionKey: key)
        }
    }

    /// Waits until something is written to the FIFO at `path` (on a thread of its own: opening a
    /// FIFO blocks), after saying so on stderr.
    static func fifoGate(_ path: String) -> @Sendable () async -> Void {
        {
            log.warn("test lease gate: holding the lease until \(path) is written")
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                SystemThread.start(named: "relay-test-gate") {
                    let fd = open(path, O_RDONLY)
                    if fd >= 0 {
                        var byte: UInt8 = 0
                        _ = read(fd, &byte, 1)
                        Glibc.close(fd)
                    }
                    continuation.resume()
                }
            }
        }
    }

    /// The catalog `initialize` reports.
    var catalog: EnvironmentCatalog {
        let defaultName = defaultEnvironmentName
        return EnvironmentCatalog(
            environments: settings.environments.map { environment in
                EnvironmentCatalog.Environment(
                    name: environment.name, isDefault: environment.name == defaultName,
                    profiles: environment.profiles.map { .init(name: $0.name, type: $0.typeName) })
            })
    }

    var defaultEnvironmentName: String? {
        if let environmentOverride { return environmentOverride }
        if let name = settings.defaultEnvironment { return name }
        return settings.environments.count == 1 ? settings.environments.first?.name : nil
    }

    /// The environment named `name`, or the default one.
    package func environment(_ name: String?) throws(RPCError) -> EnvironmentRuntime {
        guard let name = name ?? defaultEnvironmentName else {
            throw RPCError(
                code: .unknownEnvironment,
                message: settings.environments.isEmpty
                    ? "no environments are configured"
                    : "no environment given and no default_environment is configured",
                data: ["known": .array(settings.environments.map { .string($0.name) })])
        }
        guard let environment = environments[name] else {
            throw RPCError(
                code: .unknownEnvironment,
                message: Self.unknown("environment", name, known: settings.environments.map(\.name)),
                data: ["known": .array(settings.environments.map { .string($0.name) })])
        }
        return environment
    }

    /// The running transfer loop of environment `name` (`nil`: the default one), where a served
    /// call that makes a transfer runs (``MethodPlacement``); `nil` until that environment's
    /// first transfer, and for a name no environment has.
    func loop(forEnvironment name: String?) -> (any TaskExecutor)? {
        (name ?? defaultEnvironmentName).flatMap { environmentTransports[$0] }?.startedExecutor
    }

    /// A running transfer loop that may read stdin (``StdioReader``): the default environment's,
    /// else any environment's; `nil` until a transfer has started one.
    var startedInputPoller: (any InputPoller)? {
        if let name = defaultEnvironmentName, let poller = environmentTransports[name]?.startedInputPoller {
            return poller
        }
        return environmentTransports.values.lazy.compactMap(\.startedInputPoller).first
    }

    /// "unknown profile 'sevice' in environment 'prod'; did you mean 'service'? (known: admin, service)": the
    /// names a caller may use, and the likely one (the did-you-mean `check-config` gives for keys).
    static func unknown(_ what: String, _ name: String, in place: String? = nil, known: [String]) -> String {
        var message = "unknown \(what) '\(name)'" + (place.map { " in \($0)" } ?? "")
        if let guess = ValueSyntax.suggestion(for: name, among: known) { message += "; did you mean '\(guess)'?" }
        message += known.isEmpty ? " (none is configured)" : " (known: \(known.joined(separator: ", ")))"
        return message
    }

    /// The profile named `name` in `environment`, or its default one; `nil` when the environment
    /// has no profile at all.
    package func profile(_ name: String?, in environment: EnvironmentRuntime) throws(RPCError) -> ProfileRuntime? {
        let known = JSONValue.array(environment.settings.profiles.map { .string($0.name) })
        guard let name = name ?? environment.defaultProfileName else {
            if environment.profiles.isEmpty { return nil }
            throw RPCError(
                code: .unknownProfile,
                message: "no profile given and environment '\(environment.name)' has no default_profile",
                data: ["known": known])
        }
        guard let profile = environment.profiles[name] else {
            throw RPCError(
                code: .unknownProfile,
                message: Self.unknown(
                    "profile", name, in: "environment '\(environment.name)'",
                    known: environment.settings.profiles.map(\.name)),
                data: ["known": known])
        }
        return profile
    }

    /// Stops the transports after letting pending token commits settle.
    package func close() async {
        await manager.close()
        for transport in transports { transport.shutdown() }
    }
}
