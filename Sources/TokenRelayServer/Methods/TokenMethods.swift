import FoundationEssentials
import TokenRelayAuth
import TokenRelayJSONRPC

/// The params of `token-invalidate` and `logout`: `{environment?, profile?, all?}`.
package struct SessionSelection: MethodParams {
    var environment: String?
    var profile: String?
    var all: Bool

    package init(decoding params: JSONValue?) throws(RPCError) {
        var reader = try ParamReader(params, allowed: ["environment", "profile", "all"])
        environment = reader.string("environment")
        profile = reader.string("profile")
        all = reader.bool("all") ?? false
        if all && (environment != nil || profile != nil) {
            reader.report(["all"], "all: true selects every session; leave out environment and profile")
        }
        try reader.finish()
    }
}

/// What `token-invalidate`, `logout`, `status` and `token-get` (TokenMethods+CredentialHelper.swift)
/// do, for the method types and the one-shot commands alike.
package struct TokenMethods: Sendable {
    package let runtime: RelayRuntime
    let subscriptionCount: @Sendable () -> Int

    package init(runtime: RelayRuntime, subscriptionCount: @escaping @Sendable () -> Int) {
        self.runtime = runtime
        self.subscriptionCount = subscriptionCount
    }

    /// The sessions `selection` names; validates the names. A named environment without a
    /// profile means every profile of it, whatever its `default_profile` says; naming neither
    /// means the default environment's default profile.
    func resolve(_ selection: SessionSelection) throws -> (environment: String?, profile: String?) {
        let environmentName = selection.environment
        let profileName = selection.profile
        if selection.all { return (nil, nil) }
        let environment = try runtime.environment(environmentName)
        if let profileName {
            _ = try runtime.profile(profileName, in: environment)
            return (environment.name, profileName)
        }
        if environmentName != nil { return (environment.name, nil) }
        return (environment.name, try runtime.profile(nil, in: environment)?.name)
    }

    package func invalidate(_ selection: SessionSelection) async throws -> TokenInvalidateMethod.Result {
        let (environment, profile) = try resolve(selection)
        var count = await runtime.manager.invalidate(environment: environment, profile: profile)
        for source in fetchedBearerSources(environment: environment, profile: profile) {
            source.reset()
            count += 1
        }
        return TokenInvalidateMethod.Result(invalidated: count)
    }

    package func logout(_ selection: SessionSelection) async throws -> LogoutMethod.Result {
        let (environment, profile) = try resolve(selection)
        var count = try await runtime.manager.logout(environment: environment, profile: profile)
        for source in fetchedBearerSources(environment: environment, profile: profile) {
            source.reset()
            count += 1
        }
        return LogoutMethod.Result(loggedOut: count)
    }

    private func fetchedBearerSources(environment: String?, profile: String?) -> [FetchedBearerCredentialSource] {
        runtime.environments.values.filter { environment == nil || $0.name == environment }.flatMap { env in
            env.profiles.values.filter { profile == nil || $0.name == profile }.compactMap {
                $0.credentials as? FetchedBearerCredentialSource
            }
        }
    }

    package func status() async throws -> StatusMethod.Result {
        // Sessions this process has not used yet show what the store holds (another process's
        // tokens); a store that cannot be opened is reported, not fatal.
        var storeError: RPCError?
        do {
            try await runtime.manager.loadStored()
        } catch {
            storeError = ErrorMapping.rpcError(error)
        }
        let store = runtime.manager.storeInfo
        let sessions = await runtime.manager.status().sorted {
            ($0.environment, $0.profile) < ($1.environment, $1.profile)
        }
        return StatusMethod.Result(
            sessions: sessions, subscriptions: subscriptionCount(), store: store,
            storeError: storeError.map { (kind: $0.kind, message: $0.message) })
    }
}

extension Duration {
    /// The duration in seconds as a `TimeInterval`.
    var timeIntervalValue: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
