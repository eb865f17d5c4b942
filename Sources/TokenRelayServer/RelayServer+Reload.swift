import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging

extension RelayServer {
    /// `config-reload` and SIGHUP (SPEC §5.7): loads the config again (same path, same loader as
    /// at start) and swaps in a runtime built from it. A config that fails to load, a changed
    /// `store` or `server` section (they need a restart) or a profile that cannot work changes
    /// nothing and is an error of kind `config`. Unchanged profiles keep their sessions,
    /// subscriptions and in-flight requests; removed and changed ones finish their in-flight
    /// requests on the old runtime, their subscriptions end with `closed`, and changed ones start
    /// afresh. Answers `{added, changed, removed}`: lists of `{environment, profile}` pairs.
    func reload() async throws -> ConfigReloadMethod.Result {
        try await reloads.run { [self] in
            guard let load = options.loadConfig else {
                throw RPCError(code: .config, message: "there is no configuration file to reload")
            }
            let result = await load()
            for diagnostic in result.diagnostics {
                if diagnostic.severity == .error {
                    log.error("reload: \(diagnostic.description)")
                } else {
                    log.warn("reload: \(diagnostic.description)")
                }
            }
            guard !result.hasErrors, let settings = result.settings else {
                throw RPCError(
                    code: .config,
                    message: "the configuration has errors; nothing was changed: "
                        + (result.errors.first?.rendered ?? "it could not be loaded"),
                    data: ["diagnostics": .array(result.diagnostics.map(Self.diagnosticValue))])
            }
            return try await runtimes.use { old in
                let diff = SettingsDiff(old: old.settings, new: settings)
                guard diff.restartSections.isEmpty else {
                    let sections = diff.restartSections.joined(separator: " and ")
                    throw RPCError(
                        code: .config,
                        message: "the \(sections) section changed: that needs a restart; nothing was changed",
                        data: ["sections": .array(diff.restartSections.map { .string($0) })])
                }
                if let name = old.environmentOverride, settings.environment(named: name) == nil {
                    throw RPCError(
                        code: .config,
                        message:
                            "--env names environment '\(name)', which the new configuration removes; nothing was changed"
                    )
                }
                let new: RelayRuntime
                do {
                    new = try await RelayRuntime.make(
                        settings: settings, environmentOverride: old.environmentOverride, reusing: (old, diff))
                } catch {
                    throw ErrorMapping.rpcError(error)
                }
                await subscriptions.replaceRuntime(with: new, diff: diff)
                if diff.mcpChanged, let face = mcpFace { await face.exposureChanged() }
                log.info(
                    "configuration reloaded: \(diff.added.count) added, \(diff.changed.count) changed, "
                        + "\(diff.removed.count) removed")
                return ConfigReloadMethod.Result(added: diff.added, changed: diff.changed, removed: diff.removed)
            }
        }
    }

    /// SIGHUP: reloads and logs the outcome (there is no one to answer).
    public func reloadOnSignal() async {
        do {
            _ = try await reload()
        } catch {
            let failure = ErrorMapping.rpcError(error)
            log.error("reload on SIGHUP failed: \(failure.message)")
        }
    }

    private static func diagnosticValue(_ diagnostic: ConfigDiagnostic) -> JSONValue {
        [
            "file": .string(diagnostic.file), "line": .int(diagnostic.line), "column": .int(diagnostic.column),
            "severity": .string(diagnostic.severity.rawValue), "message": .string(diagnostic.message),
        ]
    }
}

/// Runs one operation at a time, in arrival order.
actor SerialRunner {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func run<T: Sendable>(_ operation: @Sendable () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { waiters.append($0) }
        }
        busy = true
        defer {
            if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
        }
        return try await operation()
    }
}
