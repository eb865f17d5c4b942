/// How the config is being loaded; decides how strict interpolation and secrets are.
public enum ConfigLoadMode: Sendable, Hashable {
    /// Loading to serve: an unset variable without default is an error, and types not
    /// implemented yet are errors.
    case serve
    /// `check-config`: unset variables are warnings unless `resolveSecrets`, in which case they
    /// are errors and every secret is resolved to prove it resolves.
    case check(resolveSecrets: Bool)

    /// Whether an unset variable without default is an error.
    var requiresVariables: Bool {
        switch self {
        case .serve: return true
        case .check(let resolveSecrets): return resolveSecrets
        }
    }

    /// Whether this is `serve`.
    var isServe: Bool { self == .serve }
}

/// Decodes a ``YAMLNode`` tree into ``Settings``, collecting every problem as a diagnostic
/// rather than stopping at the first. The key tables are exposed so tests can compare them with
/// the JSON Schema.
struct SettingsDecoder {
    let file: String
    let folder: String
    let mode: ConfigLoadMode
    let resolver: SecretResolver
    var sink: DiagnosticSink
    /// Every secret source decoded, in file order (for `check-config --resolve-secrets`).
    var secrets: [SecretSource] = []
    /// The environment variables secret sources read (`tokenrelay exec` removes them from its child's).
    var secretVariables: Set<String> = []

    init(file: String, mode: ConfigLoadMode, resolver: SecretResolver) {
        self.file = file
        self.folder = ValueSyntax.folder(of: file)
        self.mode = mode
        self.resolver = resolver
        self.sink = DiagnosticSink(file: file)
    }

    var environment: [String: String] { resolver.environment }

    // MARK: Key tables

    /// Keys allowed at the top level (plus any `x-` key, ignored: a place to hold YAML anchors).
    static let topKeys: Set<String> = ["version", "default_environment", "environments", "store", "server"]
    /// Keys allowed under `server`.
    static let serverKeys: Set<String> = ["max_concurrent_requests", "max_queued_requests", "max_message_bytes"]
    /// Keys allowed under `store`.
    static let storeKeys: Set<String> = ["type", "path", "encryption_key", "key", "shared"]
    static let sharedTierKeys: Set<String> = ["type", "url", "password", "timeout", "schema"]
    /// Keys allowed in an environment.
    static let environmentKeys: Set<String> = [
        "base_url", "default_profile", "headers", "timeout", "connect_timeout", "allowed_origins", "ca_file", "proxy",
        "max_response_bytes", "events", "profiles", "mcp", "exec",
    ]
    /// Keys allowed in an `mcp` block (environment or profile).
    static let mcpKeys: Set<String> = ["allow", "deny", "confirm", "max_response_bytes"]
    /// Keys allowed in an environment's `exec` block.
    static let execKeys: Set<String> = ["env", "allow", "deny", "redact"]
    /// Keys allowed under an environment's `events`.
    static let eventsKeys: Set<String> = ["idle_timeout", "max_backoff"]
    /// Keys allowed in a secret source mapping.
    static let secretSourceKeys: Set<String> = ["env", "file", "command", "timeout"]
    /// Keys every profile accepts.
    static let profileCommonKeys: Set<String> = ["type", "expose_token", "git_username", "mcp"]
    /// Keys every OAuth profile accepts.
    static let oauthKeys: Set<String> = profileCommonKeys.union([
        "issuer", "token_url", "client_id", "client_secret", "client_auth", "scopes", "audience", "resource",
        "expiry_skew", "discover", "resource_indicator", "step_up",
        "client_key", "client_key_alg", "client_key_id", "client_assertion_audience", "dpop",
        "client_cert", "mtls_bound",
    ])
    /// Keys only a grant that discovery can resolve takes (SPEC §9): `token_exchange` names its
    /// server itself, and `jwt_bearer` takes `discover` (a resource's server that accepts an
    /// ID-JAG, SPEC §9.9) but never steps up.
    static let discoveryOnlyKeys: Set<String> = ["discover", "step_up"]
    /// Keys of both interactive profile types.
    static let interactiveKeys: Set<String> = ["open_browser", "login_timeout", "parameters"]
    /// Keys of `redirect` and of `parameters`.
    static let redirectKeys: Set<String> = ["port", "path"]
    static let parameterCategories: Set<String> = ["authorization", "token"]
    static let profileKeys: [String: Set<String>] = [
        "client_credentials": oauthKeys,
        "refresh_token": oauthKeys.union(["refresh_token"]),
        "authorization_code": oauthKeys.union(interactiveKeys).union([
            "authorization_url", "redirect", "client_metadata_url",
        ]),
        "device_code": oauthKeys.union(interactiveKeys).union(["device_authorization_url"]),
        "jwt_bearer": oauthKeys.subtracting(["step_up"]).union(["assertion"]),
        "token_exchange": oauthKeys.subtracting(discoveryOnlyKeys).union([
            "subject", "subject_token", "subject_token_type", "requested_token_type", "actor", "actor_token",
            "actor_token_type",
        ]),
        "api_key": profileCommonKeys.union(["header", "query", "value"]),
        "basic": profileCommonKeys.union(["username", "password"]),
        "bearer": profileCommonKeys.union(["token", "cache"]),
    ]
    /// Profile types in documentation order.
    static let profileTypes = [
        "client_credentials", "refresh_token", "authorization_code", "device_code", "jwt_bearer", "token_exchange",
        "api_key", "basic", "bearer",
    ]
    /// Keys of a token exchange's `subject` / `actor`.
    static let exchangeProfileKeys: Set<String> = ["profile", "token"]
    /// Which of a profile's tokens `subject: { profile, token }` presents.
    static let exchangeProfileTokens = ["access_token", "id_token"]
    /// Keys of `assertion: { profile }`.
    static let assertionProfileKeys: Set<String> = ["profile"]
    /// Keys of `assertion: { github_actions: {...} }`.
    static let githubActionsKeys: Set<String> = ["audience"]

    /// Every key table by level: `top`, `server`, `store`, `environment`, `events`, `secret`,
    /// and `profile.<type>` for each profile type.
    static var knownKeys: [String: Set<String>] {
        var tables: [String: Set<String>] = [
            "top": topKeys, "server": serverKeys, "store": storeKeys, "shared": sharedTierKeys,
            "environment": environmentKeys, "events": eventsKeys, "secret": secretSourceKeys, "mcp": mcpKeys,
            "exec": execKeys,
        ]
        for (type, keys) in profileKeys { tables["profile.\(type)"] = keys }
        return tables
    }

    // MARK: Structure helpers

    /// The pairs of a mapping node keyed by name (first occurrence), after reporting non-scalar,
    /// duplicate and unknown keys. `null` counts as an empty mapping. `nil` when not a mapping.
    mutating func fields(
        _ node: YAMLNode, path: String, context: String, allowed: Set<String>?, allowExtensions: Bool = false,
        unknownHint: (String) -> String? = { _ in nil }
    ) -> Fields? {
        if node.isNull { return Fields() }
        guard let pairs = node.pairs else {
            sink.error("'\(path)' must be a mapping of keys to values, found \(node.kindDescription)", at: node.mark)
            return nil
        }
        var result = Fields()
        for pair in pairs {
            guard let key = pair.key.scalar?.value, !key.isEmpty else {
                sink.error("keys in '\(path)' must be non-empty strings", at: pair.key.mark)
                continue
            }
            if let first = result[key] {
                sink.error(
                    "duplicate key '\(key)' in \(context) (first at line \(first.key.mark.line))", at: pair.key.mark)
                continue
            }
            if allowExtensions && key.hasPrefix("x-") { continue }
            if let allowed, !allowed.contains(key) {
                var message = "unknown key '\(key)' in \(context)"
                if let hint = unknownHint(key) {
                    message += "; \(hint)"
                } else if let guess = ValueSyntax.suggestion(for: key, among: allowed.sorted()) {
                    message += "; did you mean '\(guess)'?"
                } else {
                    message += "; expected one of: \(allowed.sorted().joined(separator: ", "))"
                }
                sink.error(message, at: pair.key.mark)
                continue
            }
            result.append(key, pair)
        }
        return result
    }

    /// The accepted pairs of one mapping by key, in file order. A settings mapping has a handful
    /// of keys, so a look-up is a scan of short strings, cheaper than hashing each of them; a
    /// mapping of the file's own names (`parameters`) may have any number, and past
    /// ``scanLimit`` keys its look-ups go through an index, so a long one stays linear to decode.
    struct Fields {
        /// The keys, apart from their pairs: a scan compares strings and copies no pair.
        private(set) var keys: [String] = []
        private(set) var pairs: [YAMLPair] = []
        /// Positions by key, once there are more than ``scanLimit`` keys.
        private var positions: [String: Int]?
        static let scanLimit = 16

        /// The accepted keys and their pairs, in file order.
        var entries: Zip2Sequence<[String], [YAMLPair]> { zip(keys, pairs) }

        subscript(key: String) -> YAMLPair? {
            if let positions { return positions[key].map { pairs[$0] } }
            return keys.firstIndex(of: key).map { pairs[$0] }
        }

        /// Adds `pair` under `key` (the first pair of a key is the one a look-up finds).
        mutating func append(_ key: String, _ pair: YAMLPair) {
            keys.append(key)
            pairs.append(pair)
            if positions != nil {
                if positions?[key] == nil { positions?[key] = keys.count - 1 }
            } else if keys.count > Self.scanLimit {
                positions = Dictionary(zip(keys, keys.indices), uniquingKeysWith: { first, _ in first })
            }
        }
    }

    /// The pairs of a mapping whose keys are names (environments, profiles, headers), in order,
    /// with duplicates reported.
    mutating func namedEntries(_ node: YAMLNode, path: String) -> [(name: String, pair: YAMLPair)] {
        if node.isNull { return [] }
        guard let pairs = node.pairs else {
            sink.error("'\(path)' must be a mapping of names to entries, found \(node.kindDescription)", at: node.mark)
            return []
        }
        var seen: [String: SourceMark] = [:]
        var result: [(name: String, pair: YAMLPair)] = []
        for pair in pairs {
            guard let name = pair.key.scalar?.value, !name.isEmpty else {
                sink.error("names in '\(path)' must be non-empty strings", at: pair.key.mark)
                continue
            }
            if let first = seen[name] {
                sink.error("duplicate name '\(name)' in '\(path)' (first at line \(first.line))", at: pair.key.mark)
                continue
            }
            seen[name] = pair.key.mark
            result.append((name, pair))
        }
        return result
    }
}
