import TokenRelayConfig
import TokenRelayJSONRPC

/// What `tokenrelay mcp` exposes, read from the settings (SPEC §8): an environment with an
/// `mcp:` block, all its profiles under its rules; a profile with its own block, that profile
/// under its own rules (and its environment, with only such profiles, when the environment has
/// no block). Nothing else.
struct MCPExposure: Sendable {
    struct Profile: Sendable {
        var name: String
        var type: String
        var rules: MCPSettings
    }

    struct Environment: Sendable {
        var name: String
        var baseURL: String
        /// The environment's own block (`nil` when only some profiles opted in).
        var rules: MCPSettings?
        var profiles: [Profile]
        /// The profile used when a call names none (exposed), if any.
        var defaultProfile: String?
        /// The environment's `max_response_bytes` (the transport's bound).
        var transportLimit: Int

        func profile(named name: String) -> Profile? { profiles.first { $0.name == name } }

        /// The rules for a call with `profile` (`nil`: an environment without profiles).
        func rules(for profile: Profile?) -> MCPSettings? { profile?.rules ?? rules }

        /// The size a body is cut to for `profile`.
        func maxResponseBytes(for profile: Profile?) -> Int {
            min(
                profile?.rules.maxResponseBytes ?? rules?.maxResponseBytes ?? MCPSettings.defaultMaxResponseBytes,
                transportLimit)
        }
    }

    var environments: [Environment]
    /// The environment used when a call names none (exposed), if any.
    var defaultEnvironment: String?

    /// `only` (`tokenrelay mcp --env NAME`): expose that environment alone.
    init(settings: Settings, defaultEnvironment: String?, only: String? = nil) {
        environments = settings.environments.compactMap { environment in
            if let only, environment.name != only { return nil }
            let profiles = environment.profiles.compactMap { profile -> Profile? in
                guard let rules = profile.mcp ?? environment.mcp else { return nil }
                return Profile(name: profile.name, type: profile.typeName, rules: rules)
            }
            guard environment.mcp != nil || !profiles.isEmpty else { return nil }
            let names = profiles.map(\.name)
            var defaultProfile: String?
            if let name = environment.defaultProfile, names.contains(name) {
                defaultProfile = name
            } else if profiles.count == 1 {
                defaultProfile = names.first
            }
            return Environment(
                name: environment.name, baseURL: environment.baseURL, rules: environment.mcp, profiles: profiles,
                defaultProfile: defaultProfile, transportLimit: environment.maxResponseBytes)
        }
        let names = environments.map(\.name)
        if let defaultEnvironment, names.contains(defaultEnvironment) {
            self.defaultEnvironment = defaultEnvironment
        } else if environments.count == 1 {
            self.defaultEnvironment = names.first
        }
    }

    func environment(named name: String) -> Environment? { environments.first { $0.name == name } }
}

extension RelayRuntime {
    /// What this runtime exposes to agents: with `--env`, that environment alone.
    var mcpExposure: MCPExposure {
        MCPExposure(settings: settings, defaultEnvironment: defaultEnvironmentName, only: environmentOverride)
    }
}
