import TokenRelayHTTPFields

/// Where the config file is, and whether the user named it (then a missing file is fatal).
public struct ConfigLocation: Sendable, Hashable {
    /// The file path.
    public var path: String
    /// Named by `--config` or `$TOKENRELAY_CONFIG` (not the implicit default).
    public var isExplicit: Bool

    public init(path: String, isExplicit: Bool) {
        self.path = path
        self.isExplicit = isExplicit
    }
}

/// The outcome of loading a config: settings when it is valid, and every diagnostic.
public struct ConfigLoadResult: Sendable {
    /// The settings; `nil` when any error was reported.
    public var settings: Settings?
    /// Every problem found, errors and warnings, in file order.
    public var diagnostics: [ConfigDiagnostic]
    /// The file that was read (`nil` when no file was found or located).
    public var file: String?

    public init(settings: Settings?, diagnostics: [ConfigDiagnostic], file: String?) {
        self.settings = settings
        self.diagnostics = diagnostics
        self.file = file
    }

    /// The error diagnostics.
    public var errors: [ConfigDiagnostic] { diagnostics.filter { $0.severity == .error } }
    /// The warning diagnostics.
    public var warnings: [ConfigDiagnostic] { diagnostics.filter { $0.severity == .warning } }
    /// Whether the config is invalid.
    public var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }
}

/// Finds, reads, parses and validates the config file. Everything outside the process (the
/// environment, files, commands) is injected, so tests are hermetic.
public struct ConfigLoader: Sendable {
    /// Reads the config file, secret files and checks `ca_file`.
    public var fileSystem: any ConfigFileSystem
    /// Runs `{ command: [...] }` secret sources.
    public var commandRunner: any SecretCommandRunner
    /// In `check(resolveSecrets: true)`, reads the keys and certificates of every OAuth client once
    /// its secrets are resolved, as its requests will (SPEC §10). Config has no parser of keys of
    /// its own (none that could disagree with the requests'): `check-config` passes
    /// TokenRelayAuth's. `nil`: keys are only checked to look like PEM.
    public var clientKeyCheck: ClientKeyCheck?

    /// What ``clientKeyCheck`` is given: an OAuth client and the resolved value of a secret source
    /// of the config (`nil` when it did not resolve: that is reported already). It answers the
    /// errors it finds, at the marks of the settings at fault, never with a secret's value.
    public typealias ClientKeyCheck =
        @Sendable (_ client: OAuthClientSettings, _ resolved: (SecretSource) -> String?) -> [ConfigDiagnostic]

    public init(
        fileSystem: any ConfigFileSystem = LocalFileSystem(),
        commandRunner: any SecretCommandRunner = ProcessCommandRunner(), clientKeyCheck: ClientKeyCheck? = nil
    ) {
        self.fileSystem = fileSystem
        self.commandRunner = commandRunner
        self.clientKeyCheck = clientKeyCheck
    }

    /// The keys the decoder accepts at each level: `top`, `server`, `store`, `environment`,
    /// `events`, `secret` and `profile.<type>` (used to check the JSON Schema agrees).
    public static var knownKeyTables: [String: Set<String>] { SettingsDecoder.knownKeys }

    /// The config path: `path` (from `--config`), else `$TOKENRELAY_CONFIG`, else
    /// `$XDG_CONFIG_HOME/tokenrelay/config.yaml`, else `$HOME/.config/tokenrelay/config.yaml`.
    /// `nil` when none can be formed (no HOME).
    public static func locate(path: String?, environment: [String: String]) -> ConfigLocation? {
        if let path, !path.isEmpty { return ConfigLocation(path: path, isExplicit: true) }
        if let path = environment["TOKENRELAY_CONFIG"], !path.isEmpty {
            return ConfigLocation(path: path, isExplicit: true)
        }
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            return ConfigLocation(path: xdg + "/tokenrelay/config.yaml", isExplicit: false)
        }
        if let home = environment["HOME"], !home.isEmpty {
            return ConfigLocation(path: home + "/.config/tokenrelay/config.yaml", isExplicit: false)
        }
        return nil
    }

    /// Locates and loads the config. A missing explicit file is an error; a missing implicit
    /// default is a warning and gives ``Settings/empty``.
    public func load(path: String?, environment: [String: String], mode: ConfigLoadMode) async -> ConfigLoadResult {
        guard let location = Self.locate(path: path, environment: environment) else {
            let warning = ConfigDiagnostic(
                file: "config.yaml", mark: .file, severity: .warning,
                message:
                    "no config file given and neither XDG_CONFIG_HOME nor HOME is set; running with no environments")
            return ConfigLoadResult(settings: .empty, diagnostics: [warning], file: nil)
        }
        let bytes: [UInt8]
        do {
            bytes = try fileSystem.contents(atPath: location.path)
        } catch {
            if case .notFound = error, !location.isExplicit {
                let warning = ConfigDiagnostic(
                    file: location.path, mark: .file, severity: .warning,
                    message: "no config file here; running with no environments (create it, or pass --config)")
                return ConfigLoadResult(settings: .empty, diagnostics: [warning], file: nil)
            }
            let message: String
            switch error {
            case .notFound: message = "config file not found"
            case .unreadable(_, let reason): message = "cannot read the config file: \(reason)"
            }
            let failure = ConfigDiagnostic(file: location.path, mark: .file, severity: .error, message: message)
            return ConfigLoadResult(settings: nil, diagnostics: [failure], file: location.path)
        }
        return await decode(bytes: bytes, file: location.path, environment: environment, mode: mode)
    }

    /// Decodes YAML text held in memory as if it were the file `file`.
    public func decode(yaml: String, file: String = "<memory>", environment: [String: String], mode: ConfigLoadMode)
        async
        -> ConfigLoadResult
    {
        await decode(bytes: Array(yaml.utf8), file: file, environment: environment, mode: mode)
    }

    /// Decodes YAML bytes as if they were the file `file`. In `check(resolveSecrets: true)`
    /// mode every secret is resolved (and registered with the redactor) to prove it resolves.
    public func decode(bytes: [UInt8], file: String, environment: [String: String], mode: ConfigLoadMode) async
        -> ConfigLoadResult
    {
        var (result, secrets, decoded) = decodeParts(bytes: bytes, file: file, environment: environment, mode: mode)
        if case .check(resolveSecrets: true) = mode {
            var values: [SecretSource.Identity: String] = [:]
            for secret in secrets {
                do {
                    let value = try await secret.resolve()
                    values[secret.identity] = value
                    // The store key is read by the parser `serve` reads it with: what one refuses,
                    // so does the other.
                    if Self.storeKeyPaths.contains(secret.keyPath), StoreKeyText.decode(value) == nil {
                        result.diagnostics.append(
                            ConfigDiagnostic(
                                file: file, mark: secret.mark, severity: .error,
                                message: "'\(secret.keyPath)' \(StoreKeyText.requirement)"))
                    }
                } catch {
                    result.diagnostics.append(
                        ConfigDiagnostic(file: file, mark: secret.mark, severity: .error, message: error.message))
                }
            }
            if let clientKeyCheck, let decoded {
                let clients = decoded.environments.flatMap { $0.profiles.compactMap(\.kind.oauthClient) }
                for client in clients {
                    result.diagnostics += clientKeyCheck(client) { values[$0.identity] }
                }
            }
            if result.hasErrors { result.settings = nil }
        }
        return result
    }

    /// The key paths of the store's encryption key, as either spelling gives it (checked as a
    /// key once resolved).
    static let storeKeyPaths: Set<String> = ["store.encryption_key", "store.key"]

    /// Parses and validates without resolving any secret or running anything (synchronous;
    /// used by the fuzzer and by `decode`).
    public func decodeStructure(bytes: [UInt8], file: String, environment: [String: String], mode: ConfigLoadMode)
        -> (ConfigLoadResult, [SecretSource])
    {
        let (result, secrets, _) = decodeParts(bytes: bytes, file: file, environment: environment, mode: mode)
        return (result, secrets)
    }

    /// ``decodeStructure(bytes:file:environment:mode:)`` and the settings decoded even when some
    /// were invalid (what decoded of them; `nil` when the YAML did not parse).
    private func decodeParts(bytes: [UInt8], file: String, environment: [String: String], mode: ConfigLoadMode)
        -> (ConfigLoadResult, [SecretSource], Settings?)
    {
        let resolver = SecretResolver(environment: environment, fileSystem: fileSystem, commandRunner: commandRunner)
        var decoder = SettingsDecoder(file: file, mode: mode, resolver: resolver)
        let root: YAMLNode?
        do {
            root = try YAMLParser().parse(bytes: bytes)
        } catch {
            decoder.sink.error(error.message, at: error.mark)
            return (ConfigLoadResult(settings: nil, diagnostics: decoder.sink.diagnostics, file: file), [], nil)
        }
        let settings = decoder.decode(root)
        let diagnostics = decoder.sink.diagnostics.sorted { $0.mark < $1.mark }
        let valid = !decoder.sink.hasErrors
        return (
            ConfigLoadResult(settings: valid ? settings : nil, diagnostics: diagnostics, file: file), decoder.secrets,
            settings
        )
    }
}
