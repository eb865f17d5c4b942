import Auth
import Config
import Foundation
import Glibc
import HTTP
import JSONRPC
import Logging

/// Everything the methods need, built from the settings at start: one transport and runtime
/// per environment, and the token manager holding every OAuth session.
final class RelayRuntime: Sendable {
    let settings: Settings
    /// `--env`, which overrides the config's `default_environment`.
    let environmentOverride: String?
    let manager: TokenManager
    let environments: [String: EnvironmentRuntime]
    /// Transports to shut down at the end.
    let transports: [LazyTransport]

    private init(
        settings: Settings, environmentOverride: String?, manager: TokenManager,
        environments: [String: EnvironmentRuntime], transports: [LazyTransport]
    ) {
        self.settings = settings
        self.environmentOverride = environmentOverride
        self.manager = manager
        self.environments = environments
        self.transports = transports
    }

    /// Builds the runtime. Fails (kind `config`) when a profile's settings cannot work.
    /// `testLeaseGate` (end-to-end tests only): a FIFO every renewal waits on, after taking its
    /// lease, until something is written to it.
    static func make(settings: Settings, environmentOverride: String?, testLeaseGate: String? = nil) async throws
        -> RelayRuntime
    {
        var transports: [LazyTransport] = []
        func transport(for environment: EnvironmentSettings?) -> LazyTransport {
            var options = CurlTransport.Options()
            // A paused subscription holds at most this much: 1,000 of them stay well under 100 MB.
            options.streamBufferBytes = 32 << 10
            if let environment {
                options.caFile = environment.caFile
                options.proxy = environment.proxy
                options.maxResponseBytes = environment.maxResponseBytes
                options.connectTimeout = environment.connectTimeout
                options.streamIdleTimeout = environment.events.idleTimeout
            }
            let made = LazyTransport(options: options)
            transports.append(made)
            return made
        }
        // One transport per environment carries both its API traffic (through the middlewares)
        // and its profiles' token, discovery and revocation traffic (without them), so both use
        // the environment's ca_file, proxy and connect_timeout (SPEC §5.2). Sessions of no
        // environment do not exist; the default is never created (transports are lazy).
        let environmentTransports = Dictionary(
            settings.environments.map { ($0.name, transport(for: $0)) }, uniquingKeysWith: { first, _ in first })
        let manager = TokenManager(
            transport: transport(for: nil), environmentTransports: environmentTransports.mapValues { $0 },
            store: makeStore(settings.store), afterLease: testLeaseGate.map(Self.fifoGate))
        var environments: [String: EnvironmentRuntime] = [:]
        for environment in settings.environments {
            guard let transport = environmentTransports[environment.name] else { continue }
            environments[environment.name] = try await EnvironmentRuntime.make(
                environment, manager: manager, transport: transport)
        }
        return RelayRuntime(
            settings: settings, environmentOverride: environmentOverride, manager: manager, environments: environments,
            transports: transports)
    }

    /// The configured token store (opened on first use).
    static func makeStore(_ settings: StoreSettings) -> any TokenStore {
        switch settings.type {
        case .memory:
            return InMemoryTokenStore()
        case .sqlite:
            let path = settings.path ?? StoreSettings.defaultPath(environment: ProcessInfo.processInfo.environment)
            let key = settings.encryptionKey.map { source in SecretProvider { try await source.resolve() } }
            return SQLiteTokenStore(path: path, encryptionKey: key)
        }
    }

    /// Waits until something is written to the FIFO at `path` (on a thread of its own: opening a
    /// FIFO blocks), after saying so on stderr.
    static func fifoGate(_ path: String) -> @Sendable () async -> Void {
        {
            log.warn("test lease gate: holding the lease until \(path) is written")
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
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
    func environment(_ name: String?) throws(RPCError) -> EnvironmentRuntime {
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
                code: .unknownEnvironment, message: "unknown environment '\(name)'",
                data: ["known": .array(settings.environments.map { .string($0.name) })])
        }
        return environment
    }

    /// The profile named `name` in `environment`, or its default one; `nil` when the environment
    /// has no profile at all.
    func profile(_ name: String?, in environment: EnvironmentRuntime) throws(RPCError) -> ProfileRuntime? {
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
                code: .unknownProfile, message: "unknown profile '\(name)' in environment '\(environment.name)'",
                data: ["known": known])
        }
        return profile
    }

    /// Stops the transports after letting pending token commits settle.
    func close() async {
        await manager.close()
        for transport in transports { transport.shutdown() }
    }
}
