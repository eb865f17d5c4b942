import TokenRelayHTTPFields

extension SettingsDecoder {
    /// Decodes the whole document. Returns settings even when errors were reported (the caller
    /// discards them then); `nil` only when the document has no usable top-level mapping.
    mutating func decode(_ root: YAMLNode?) -> Settings? {
        guard let root, !root.isNull else {
            sink.error("the config file is empty; it needs at least 'version: 1'", at: SourceMark(line: 1, column: 1))
            return nil
        }
        guard
            let top = fields(
                root, path: "(top level)", context: "the top level", allowed: Self.topKeys, allowExtensions: true)
        else { return nil }
        var settings = Settings(file: file)

        if let version = top["version"] {
            if let number = integer(version.value, path: "version", range: Int.min...Int.max), number != 1 {
                sink.error(
                    "unsupported config 'version' \(number); this tokenrelay reads version 1", at: version.value.mark)
            }
        } else {
            sink.error("missing required key 'version' (add 'version: 1' at the top)", at: root.mark)
        }
        if let server = top["server"] { settings.server = decodeServer(server.value) }
        if let store = top["store"] { settings.store = decodeStore(store.value) }
        if settings.store.type == .sqlite && settings.store.path == nil {
            settings.store.path = StoreSettings.defaultPath(environment: environment)
        }
        if let environments = top["environments"] {
            for (name, pair) in namedEntries(environments.value, path: "environments") {
                if let environment = decodeEnvironment(name: name, node: pair.value) {
                    settings.environments.append(environment)
                }
            }
        }
        if let pair = top["default_environment"], let value = nonEmptyString(pair.value, path: "default_environment") {
            let names = settings.environments.map(\.name)
            if !value.unresolved, !names.contains(value.text), environmentsDecodedCleanly(top) {
                var message = "default_environment '\(value.text)' is not defined under 'environments'"
                if let guess = ValueSyntax.suggestion(for: value.text, among: names) {
                    message += "; did you mean '\(guess)'?"
                }
                sink.error(message, at: pair.value.mark)
            }
            settings.defaultEnvironment = value.text
        }
        if settings.store.type == .memory {
            for environment in settings.environments {
                for profile in environment.profiles where profile.typeName == "refresh_token" {
                    sink.warning(
                        "profile '\(profile.name)' rotates its refresh token but the store is 'memory': after a restart it starts again from the seed refresh_token (use store: sqlite to keep the rotated one)",
                        at: profile.mark)
                }
            }
        }
        let keepsTokens = settings.environments.contains { environment in
            environment.profiles.contains { Self.tokenProfileTypes.contains($0.typeName) }
        }
        if settings.store.type == .sqlite && settings.store.encryptionKey == nil && !mode.isServe && keepsTokens {
            let mark = top["store"]?.key.mark ?? SourceMark(line: 1, column: 1)
            switch settings.store.key {
            case .automatic:
                sink.warning(
                    "the token store has no key configured: tokens are sealed with a key from the desktop's secret "
                        + "service where one is reachable (tokenrelay status says which), and kept in plain text in "
                        + "its 0600 file where there is none (set store.encryption_key, or store.key: keyring to "
                        + "require the secret service, or store.key: none to say plain text is meant)",
                    at: mark)
            case .none:
                sink.warning(
                    "store.key is none: tokens are kept in plain text in the store's 0600 file", at: mark)
            case .keyring:
                break
            }
        }
        settings.secretVariables = secretVariables
        return settings
    }

    /// Profile types whose tokens the store keeps.
    static let tokenProfileTypes: Set<String> = [
        "client_credentials", "refresh_token", "authorization_code", "device_code",
    ]

    /// Whether an environment named under `environments` could have been skipped by an error
    /// (then a dangling default is not reported twice).
    private func environmentsDecodedCleanly(_ top: Fields) -> Bool {
        top["environments"]?.value.pairs != nil || top["environments"] == nil
    }

    mutating func decodeServer(_ node: YAMLNode) -> ServerSettings {
        var server = ServerSettings()
        guard let keys = fields(node, path: "server", context: "'server'", allowed: Self.serverKeys) else {
            return server
        }
        if let pair = keys["max_concurrent_requests"],
            let value = integer(pair.value, path: "server.max_concurrent_requests", range: 1...1_000_000)
        {
            server.maxConcurrentRequests = value
        }
        if let pair = keys["max_queued_requests"],
            let value = integer(pair.value, path: "server.max_queued_requests", range: 0...100_000_000)
        {
            server.maxQueuedRequests = value
        }
        if let pair = keys["max_message_bytes"], let value = size(pair.value, path: "server.max_message_bytes") {
            server.maxMessageBytes = value
        }
        return server
    }

    mutating func decodeStore(_ node: YAMLNode) -> StoreSettings {
        var store = StoreSettings()
        guard let keys = fields(node, path: "store", context: "'store'", allowed: Self.storeKeys) else { return store }
        if let pair = keys["type"],
            let type = choice(pair.value, path: "store.type", choices: StoreSettings.Kind.allCases.map(\.rawValue))
        {
            store.type = StoreSettings.Kind(rawValue: type) ?? .sqlite
        }
        if let pair = keys["path"] {
            if store.type == .sqlite {
                store.path = filePath(pair.value, path: "store.path")
            } else {
                sink.error("'store.path' only applies to 'type: sqlite'", at: pair.key.mark)
            }
        }
        if let pair = keys["encryption_key"] {
            if store.type == .sqlite {
                store.encryptionKey = secretSource(pair.value, path: "store.encryption_key")
            } else {
                sink.error("'store.encryption_key' only applies to 'type: sqlite'", at: pair.key.mark)
            }
        }
        if let pair = keys["key"] {
            if keys["encryption_key"] != nil {
                sink.error(
                    "'store.key' and 'store.encryption_key' both give the store's key: keep one "
                        + "(store.key: {env: NAME} is store.encryption_key: {env: NAME})",
                    at: pair.key.mark)
            } else if store.type != .sqlite {
                sink.error("'store.key' only applies to 'type: sqlite'", at: pair.key.mark)
            } else if pair.value.pairs != nil {
                store.encryptionKey = secretSource(pair.value, path: "store.key")
            } else if let word = pair.value.scalar?.value, let choice = StoreSettings.KeyChoice(rawValue: word),
                choice != .automatic
            {
                store.key = choice
            } else {
                sink.error(
                    "'store.key' must be keyring (the desktop's secret service), none (plain text) or a secret "
                        + "source: { env: NAME }, { file: path } or { command: [argv] }",
                    at: pair.value.mark)
            }
        }
        if let pair = keys["shared"] {
            store.shared = decodeSharedTier(pair.value)
            if store.shared != nil, store.type != .sqlite {
                sink.error("'store.shared' needs the host's store to be 'type: sqlite'", at: pair.key.mark)
            } else if store.shared != nil, store.encryptionKey == nil {
                sink.error(
                    "'store.shared' needs 'store.encryption_key' (not the secret service's key: every host needs the same one): rows in the shared tier are sealed with the store key "
                        + "(tokenrelay store new-key prints one; every host of the fleet uses the same key)",
                    at: pair.key.mark)
            }
        }
        return store
    }

    mutating func decodeEnvironment(name: String, node: YAMLNode) -> EnvironmentSettings? {
        let base = "environments.\(name)"
        if node.pairs == nil {
            var message =
                node.isNull
                ? "environment '\(name)' is empty: it needs at least a 'base_url' (are the lines below it indented under it?)"
                : "environment '\(name)' must be a mapping of its settings, found \(node.kindDescription)"
            if Self.environmentKeys.contains(name) {
                message += "; '\(name)' is an environment setting: indent it under its environment"
            }
            sink.error(message, at: node.mark)
            return nil
        }
        guard let keys = fields(node, path: base, context: "environment '\(name)'", allowed: Self.environmentKeys)
        else { return nil }
        var environment = EnvironmentSettings(name: name, baseURL: "", mark: node.mark)
        if let pair = keys["base_url"] {
            environment.baseURL = httpURL(pair.value, path: "\(base).base_url") ?? ""
        } else {
            sink.error(
                "environment '\(name)' needs a 'base_url' (the absolute http(s) URL requests are sent to)",
                at: node.mark)
        }
        if let pair = keys["headers"] { environment.headers = decodeHeaders(pair.value, path: "\(base).headers") }
        if let pair = keys["timeout"], let value = duration(pair.value, path: "\(base).timeout") {
            environment.timeout = value
        }
        if let pair = keys["connect_timeout"], let value = duration(pair.value, path: "\(base).connect_timeout") {
            environment.connectTimeout = value
        }
        if let pair = keys["allowed_origins"], let origins = stringList(pair.value, path: "\(base).allowed_origins") {
            for (index, origin) in origins.enumerated() {
                let mark = pair.value.items?[index].mark ?? pair.value.mark
                if let problem = ValueSyntax.originProblem(origin) {
                    sink.error("'\(base).allowed_origins[\(index)]' \(problem) (write scheme://host[:port])", at: mark)
                } else {
                    // As written: libcurl's parser computes the origin at run time (OriginPolicy).
                    environment.allowedOrigins.append(origin)
                }
            }
        }
        if let pair = keys["ca_file"], let path = filePath(pair.value, path: "\(base).ca_file") {
            if resolver.fileSystem.permissions(atPath: path) == nil {
                sink.error("'\(base).ca_file' \(path) does not exist", at: pair.value.mark)
            }
            environment.caFile = path
        }
        if let pair = keys["proxy"], let value = nonEmptyString(pair.value, path: "\(base).proxy") {
            if !value.unresolved, let problem = ValueSyntax.proxyProblem(value.text) {
                sink.error("'\(base).proxy' \(problem)", at: pair.value.mark)
            }
            environment.proxy = value.text
        }
        if let pair = keys["max_response_bytes"], let value = size(pair.value, path: "\(base).max_response_bytes") {
            environment.maxResponseBytes = value
        }
        if let pair = keys["events"] {
            environment.events = decodeEvents(pair.value, path: "\(base).events", name: name)
        }
        if let pair = keys["profiles"] {
            for (profileName, entry) in namedEntries(pair.value, path: "\(base).profiles") {
                if let profile = decodeProfile(
                    name: profileName, node: entry.value, path: "\(base).profiles.\(profileName)")
                {
                    environment.profiles.append(profile)
                }
            }
        }
        if let pair = keys["mcp"] {
            environment.mcp = decodeMCP(pair.value, path: "\(base).mcp", owner: "environment '\(name)'")
        }
        if let pair = keys["exec"] {
            environment.exec = decodeExec(pair.value, path: "\(base).exec", owner: "environment '\(name)'")
        }
        checkExchangeReferences(environment, node: node)
        if let pair = keys["default_profile"], let value = nonEmptyString(pair.value, path: "\(base).default_profile") {
            let declared = keys["profiles"]?.value.pairs?.compactMap { $0.key.scalar?.value } ?? []
            if !value.unresolved, !declared.contains(value.text) {
                var message = "default_profile '\(value.text)' is not a profile of environment '\(name)'"
                if let guess = ValueSyntax.suggestion(for: value.text, among: declared) {
                    message += "; did you mean '\(guess)'?"
                }
                sink.error(message, at: pair.value.mark)
            }
            environment.defaultProfile = value.text
        }
        return environment
    }

    mutating func decodeEvents(_ node: YAMLNode, path: String, name: String) -> EventsSettings {
        var events = EventsSettings()
        guard
            let keys = fields(node, path: path, context: "'events' of environment '\(name)'", allowed: Self.eventsKeys)
        else {
            return events
        }
        if let pair = keys["idle_timeout"], let value = duration(pair.value, path: "\(path).idle_timeout") {
            events.idleTimeout = value
        }
        if let pair = keys["max_backoff"], let value = duration(pair.value, path: "\(path).max_backoff") {
            events.maxBackoff = value
        }
        return events
    }

    mutating func decodeHeaders(_ node: YAMLNode, path: String) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        var seen: Set<String> = []
        for (name, pair) in namedEntries(node, path: path) {
            if let problem = ValueSyntax.headerNameProblem(name) {
                sink.error("header '\(name)' in '\(path)' \(problem)", at: pair.key.mark)
                continue
            }
            guard seen.insert(name.lowercased()).inserted else {
                sink.error("header '\(name)' is set twice in '\(path)' (names are case-insensitive)", at: pair.key.mark)
                continue
            }
            guard let value = string(pair.value, path: "\(path).\(name)") else { continue }
            if !HTTPFieldRules.isTransmittable(value.text) {
                sink.error("header '\(name)' must not contain line breaks or NUL", at: pair.value.mark)
                continue
            }
            headers.append((name, value.text))
        }
        return headers
    }
}

extension SettingsDecoder {
    /// A token exchange's `subject`/`actor` profiles and a jwt-bearer's `assertion: { profile }`
    /// exist in the same environment and are OAuth profiles, an ID token is asked only of a
    /// profile that logs a person in with OpenID Connect, and no chain of such references comes
    /// back to where it started.
    mutating func checkExchangeReferences(_ environment: EnvironmentSettings, node: YAMLNode) {
        let byName = Dictionary(environment.profiles.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        func references(_ profile: ProfileSettings) -> [String] {
            switch profile.kind {
            case .tokenExchange(_, let exchange): return exchange.profileReferences
            case .jwtBearer(_, .profile(let name)): return [name]
            default: return []
            }
        }
        func idTokenReferences(_ profile: ProfileSettings) -> [String] {
            guard case .tokenExchange(_, let exchange) = profile.kind else { return [] }
            return [exchange.subject, exchange.actor].compactMap {
                if case .profile(let name, idToken: true)? = $0 { return name } else { return nil }
            }
        }
        for profile in environment.profiles {
            let verb =
                if case .jwtBearer = profile.kind { "takes its assertion from" } else { "exchanges the token of" }
            for reference in references(profile) {
                guard let target = byName[reference] else {
                    sink.error(
                        "profile '\(profile.name)' \(verb) profile '\(reference)', which environment "
                            + "'\(environment.name)' does not have", at: profile.mark)
                    continue
                }
                if ["api_key", "basic", "bearer"].contains(target.typeName) {
                    sink.error(
                        "profile '\(profile.name)' \(verb) '\(reference)', a \(target.typeName) profile; use a "
                            + "secret source instead", at: profile.mark)
                }
            }
            for reference in idTokenReferences(profile) {
                guard let target = byName[reference] else { continue }
                let openID = target.isInteractive && target.kind.oauthClient?.scopes.contains("openid") == true
                if !openID {
                    sink.error(
                        "profile '\(profile.name)' exchanges the ID token of '\(reference)', which has none: only an "
                            + "authorization_code or device_code profile with scope openid logs a person in with "
                            + "OpenID Connect", at: profile.mark)
                }
            }
            // A cycle: following references from this profile reaches it again.
            var seen: Set<String> = []
            var queue = references(profile)
            while let next = queue.popLast() {
                if next == profile.name {
                    sink.error(
                        "profile '\(profile.name)' is part of a cycle of profiles that use each other's tokens",
                        at: profile.mark)
                    break
                }
                guard seen.insert(next).inserted, let target = byName[next] else { continue }
                queue += references(target)
            }
        }
    }
}
