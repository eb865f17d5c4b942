/// What a configuration reload changes (SPEC §5.7): per environment and profile, what was added,
/// changed and removed, compared as written: secret sources by where they come from
/// (`{env: X}`), never by the value they resolve to; source positions are ignored.
///
/// An environment whose own settings (everything but its profiles) differ counts every one of
/// its profiles as changed: they get a new transport and start afresh. An environment without
/// profiles is listed as one entry with no profile.
public struct SettingsDiff: Sendable, Equatable {
    /// One environment/profile pair (`profile` is nil for an environment without profiles).
    public struct Entry: Sendable, Hashable, Comparable, CustomStringConvertible {
        public var environment: String
        public var profile: String?

        public init(environment: String, profile: String?) {
            self.environment = environment
            self.profile = profile
        }

        public static func < (lhs: Entry, rhs: Entry) -> Bool {
            (lhs.environment, lhs.profile ?? "") < (rhs.environment, rhs.profile ?? "")
        }

        public var description: String { profile.map { "\(environment)/\($0)" } ?? environment }
    }

    public var added: [Entry] = []
    public var changed: [Entry] = []
    public var removed: [Entry] = []
    /// Environments that were removed or whose own settings changed (their transports are replaced).
    public var replacedEnvironments: Set<String> = []
    /// Sections that cannot change without a restart (`store`, `server`) and did.
    public var restartSections: [String] = []
    /// Whether what `tokenrelay mcp` exposes changed: an `mcp:` block (environment or profile)
    /// was added, removed or edited, or an exposed environment or profile came or went. Rules
    /// are not part of a profile's settings: editing them keeps the sessions.
    public var mcpChanged = false

    public init(old: Settings, new: Settings) {
        if old.store != new.store { restartSections.append("store") }
        if old.server != new.server { restartSections.append("server") }
        func entries(_ environment: EnvironmentSettings) -> [Entry] {
            environment.profiles.isEmpty
                ? [Entry(environment: environment.name, profile: nil)]
                : environment.profiles.map { Entry(environment: environment.name, profile: $0.name) }
        }
        for environment in old.environments where new.environment(named: environment.name) == nil {
            removed += entries(environment)
            replacedEnvironments.insert(environment.name)
        }
        for environment in new.environments {
            guard let previous = old.environment(named: environment.name) else {
                added += entries(environment)
                continue
            }
            if !environment.hasSameOwnSettings(as: previous) {
                replacedEnvironments.insert(environment.name)
                let before = Set(entries(previous))
                for entry in entries(environment) {
                    if before.contains(entry) { changed.append(entry) } else { added.append(entry) }
                }
                let after = Set(entries(environment))
                removed += entries(previous).filter { !after.contains($0) }
                continue
            }
            for profile in environment.profiles {
                let entry = Entry(environment: environment.name, profile: profile.name)
                if let before = previous.profile(named: profile.name) {
                    if !profile.isSameAsWritten(before) { changed.append(entry) }
                } else {
                    added.append(entry)
                }
            }
            for profile in previous.profiles where environment.profile(named: profile.name) == nil {
                removed.append(Entry(environment: environment.name, profile: profile.name))
            }
            // A token exchange depends on the profiles whose tokens it presents (their session
            // keys are part of its own): it changes when one of them does.
            var touched = Set(
                (changed + added + removed).filter { $0.environment == environment.name }.compactMap(\.profile))
            var grew = true
            while grew {
                grew = false
                for profile in environment.profiles where !touched.contains(profile.name) {
                    guard case .tokenExchange(_, let exchange) = profile.kind,
                        exchange.profileReferences.contains(where: touched.contains)
                    else { continue }
                    touched.insert(profile.name)
                    if previous.profile(named: profile.name) != nil {
                        changed.append(Entry(environment: environment.name, profile: profile.name))
                    }
                    grew = true
                }
            }
            // An environment that gains its first profile or loses its last one.
            if previous.profiles.isEmpty && !environment.profiles.isEmpty {
                removed.append(Entry(environment: environment.name, profile: nil))
            } else if !previous.profiles.isEmpty && environment.profiles.isEmpty {
                added.append(Entry(environment: environment.name, profile: nil))
            }
        }
        added.sort()
        changed.sort()
        removed.sort()
        mcpChanged = Self.exposure(old) != Self.exposure(new)
    }

    /// Every `mcp:` block by environment and profile (`""` for the environment's own).
    private static func exposure(_ settings: Settings) -> [String: MCPSettings] {
        var blocks: [String: MCPSettings] = [:]
        for environment in settings.environments {
            if let mcp = environment.mcp { blocks[environment.name + "\u{0}"] = mcp }
            for profile in environment.profiles {
                if let mcp = profile.mcp { blocks[environment.name + "\u{0}" + profile.name] = mcp }
                // A profile that comes or goes changes an exposed environment's tools.
                if environment.mcp != nil {
                    blocks[environment.name + "\u{0}" + profile.name + "\u{0}"] = MCPSettings()
                }
            }
        }
        return blocks
    }

    /// Whether the environment/profile pair keeps running unchanged (its sessions, subscriptions
    /// and in-flight requests go on).
    public func keeps(environment: String, profile: String?) -> Bool {
        if replacedEnvironments.contains(environment) { return false }
        guard let profile else { return true }
        let entry = Entry(environment: environment, profile: profile)
        return !changed.contains(entry) && !removed.contains(entry)
    }

    /// Nothing at all differs.
    public var isEmpty: Bool {
        added.isEmpty && changed.isEmpty && removed.isEmpty && restartSections.isEmpty && !mcpChanged
    }
}

extension SecretSource {
    /// Equal as written: the same kind of source with the same variable, path or command (and,
    /// for an inline value, the same value). What the source resolves to is not compared.
    public func isSameAsWritten(_ other: SecretSource) -> Bool {
        origin == other.origin && inlineValue == other.inlineValue
    }
}

private func same(_ lhs: SecretSource?, _ rhs: SecretSource?) -> Bool {
    switch (lhs, rhs) {
    case (nil, nil): true
    case (let lhs?, let rhs?): lhs.isSameAsWritten(rhs)
    default: false
    }
}

extension EnvironmentSettings {
    /// Equal in everything but the profiles and the source position.
    public func hasSameOwnSettings(as other: EnvironmentSettings) -> Bool {
        name == other.name && baseURL == other.baseURL && defaultProfile == other.defaultProfile
            && headers.map(\.name) == other.headers.map(\.name) && headers.map(\.value) == other.headers.map(\.value)
            && timeout == other.timeout && connectTimeout == other.connectTimeout
            && allowedOrigins == other.allowedOrigins && caFile == other.caFile && proxy == other.proxy
            && maxResponseBytes == other.maxResponseBytes && events == other.events
    }
}

extension ProfileSettings {
    /// Equal as written (secret sources by origin; the source position is ignored).
    public func isSameAsWritten(_ other: ProfileSettings) -> Bool {
        name == other.name && typeName == other.typeName && exposeToken == other.exposeToken
            && kind.isSameAsWritten(other.kind)
    }
}

extension OAuthClientSettings {
    /// Equal as written (the client secret by origin).
    public func isSameAsWritten(_ other: OAuthClientSettings) -> Bool {
        issuer == other.issuer && tokenURL == other.tokenURL && clientID == other.clientID
            && same(clientSecret, other.clientSecret) && clientAuth == other.clientAuth && scopes == other.scopes
            && audience == other.audience && resource == other.resource && expirySkew == other.expirySkew
            && same(clientKey?.key, other.clientKey?.key) && clientKey?.algorithm == other.clientKey?.algorithm
            && clientKey?.keyID == other.clientKey?.keyID && clientKey?.audience == other.clientKey?.audience
    }
}

extension InteractiveLoginSettings {
    /// Equal in every setting.
    public func isSameAsWritten(_ other: InteractiveLoginSettings) -> Bool {
        authorizationURL == other.authorizationURL && deviceAuthorizationURL == other.deviceAuthorizationURL
            && redirectPorts == other.redirectPorts && redirectPath == other.redirectPath
            && openBrowser == other.openBrowser && loginTimeout == other.loginTimeout
            && authorizationParameters.map(\.0) == other.authorizationParameters.map(\.0)
            && authorizationParameters.map(\.1) == other.authorizationParameters.map(\.1)
            && tokenParameters.map(\.0) == other.tokenParameters.map(\.0)
            && tokenParameters.map(\.1) == other.tokenParameters.map(\.1)
    }
}

extension ProfileKind {
    /// Equal as written (secret sources by origin).
    public func isSameAsWritten(_ other: ProfileKind) -> Bool {
        switch (self, other) {
        case (.clientCredentials(let a), .clientCredentials(let b)):
            return a.isSameAsWritten(b)
        case (.refreshToken(let a, let seedA), .refreshToken(let b, let seedB)):
            return a.isSameAsWritten(b) && seedA.isSameAsWritten(seedB)
        case (.authorizationCode(let a, let loginA), .authorizationCode(let b, let loginB)),
            (.deviceCode(let a, let loginA), .deviceCode(let b, let loginB)):
            return a.isSameAsWritten(b) && loginA.isSameAsWritten(loginB)
        case (.tokenExchange(let a, let exchangeA), .tokenExchange(let b, let exchangeB)):
            return a.isSameAsWritten(b) && exchangeA.isSameAsWritten(exchangeB)
        case (.jwtBearer(let a, let assertionA), .jwtBearer(let b, let assertionB)):
            return a.isSameAsWritten(b) && assertionA.isSameAsWritten(assertionB)
        case (.apiKey(let placementA, let valueA), .apiKey(let placementB, let valueB)):
            return placementA == placementB && valueA.isSameAsWritten(valueB)
        case (.basic(let userA, let passwordA), .basic(let userB, let passwordB)):
            return userA == userB && passwordA.isSameAsWritten(passwordB)
        case (.bearer(let tokenA, let cacheA), .bearer(let tokenB, let cacheB)):
            return tokenA.isSameAsWritten(tokenB) && cacheA == cacheB
        default:
            return false
        }
    }
}
