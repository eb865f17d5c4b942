import TokenRelayConfig
import TokenRelayJSONRPC

/// `config-reload` (also SIGHUP): see ``RelayServer/reload()``.
enum ConfigReloadMethod: RelayMethod {
    static let method = "config-reload"

    /// `{added, changed, removed}`: lists of `{environment, profile?}`, in the order given
    /// (``SettingsDiff`` sorts them by environment, then profile).
    struct Result: MethodResult, Equatable {
        /// Profiles (or profile-less environments) the new configuration adds.
        var added: [SettingsDiff.Entry]
        /// Those it changes (every profile of a changed environment).
        var changed: [SettingsDiff.Entry]
        /// Those it removes.
        var removed: [SettingsDiff.Entry]

        var resultValue: JSONValue {
            [
                "added": Self.entriesValue(added), "changed": Self.entriesValue(changed),
                "removed": Self.entriesValue(removed),
            ]
        }

        private static func entriesValue(_ entries: [SettingsDiff.Entry]) -> JSONValue {
            .array(
                entries.map { entry in
                    var object: JSONObject = ["environment": .string(entry.environment)]
                    if let profile = entry.profile { object["profile"] = .string(profile) }
                    return .object(object)
                })
        }

        /// One `{environment, profile}` pair per profile (profile absent for an environment
        /// without profiles). A changed environment lists each of its profiles as changed.
        static let entriesSchema: JSONValue = [
            "type": "array",
            "items": Schema.object(
                ["environment": Schema.string, "profile": Schema.string], required: ["environment"], additional: false),
        ]

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(
            ["added": entriesSchema, "changed": entriesSchema, "removed": entriesSchema],
            required: ["added", "changed", "removed"], additional: false)
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result {
        try await context.server.reload()
    }

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Reloads the configuration file from the same path, with the same loader as at start (also on SIGHUP for serve). A config that fails to load changes nothing (error kind config with data.diagnostics: [{file, line, column, severity, message}]); a changed store or server section is refused the same way (data.sections; it needs a restart). Profiles are compared as written (secret sources by where they come from, not by value): unchanged ones keep their sessions, subscriptions and in-flight requests; removed ones finish their in-flight requests, new requests get unknown_environment / unknown_profile, and their subscriptions end with closed; changed ones finish their in-flight requests on the old settings, their subscriptions end with closed, and they start afresh (the held access token is not used again; refresh state is kept).",
        result: Result.schema,
        errors: [.config] + MethodDescription.standardErrors)
}
