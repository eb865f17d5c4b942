import FoundationEssentials
import TokenRelayAuth
import TokenRelayErrorKinds
import TokenRelayJSONRPC

/// `status`: per session its state (never a token value), the subscription count and the store.
package enum StatusMethod: RelayMethod {
    static let method = "status"

    /// `{sessions, subscriptions, store}`: never a token value.
    package struct Result: MethodResult {
        /// One entry per session, in the order given (``TokenMethods/status()`` sorts them).
        var sessions: [SessionStatus]
        /// How many subscriptions are open.
        var subscriptions: Int
        /// The store's type, path, sealing and schema version.
        var store: TokenStoreInfo
        /// Why the store could not be read, when it could not.
        var storeError: (kind: ErrorKind, message: String)?

        package var resultValue: JSONValue {
            var storeObject: JSONObject = ["type": .string(store.type), "encrypted": .bool(store.encrypted)]
            if let path = store.path { storeObject["path"] = .string(path) }
            if let version = store.schemaVersion { storeObject["schemaVersion"] = .int(version) }
            if let key = store.key { storeObject["key"] = .string(key) }
            if let note = store.note { storeObject["note"] = .string(note) }
            if let storeError { storeObject["error"] = Self.errorValue(storeError) }
            if let shared = store.shared {
                var sharedObject: JSONObject = ["type": .string(shared.type), "state": .string(shared.state)]
                if let since = shared.since { sharedObject["since"] = .string(since.rfc3339) }
                storeObject["shared"] = .object(sharedObject)
            }
            return [
                "sessions": .array(sessions.map { Self.sessionValue($0) }),
                "subscriptions": .int(subscriptions),
                "store": .object(storeObject),
            ]
        }

        /// One session's entry: never a token value.
        static func sessionValue(_ session: SessionStatus) -> JSONValue {
            var object: JSONObject = [
                "environment": .string(session.environment), "profile": .string(session.profile),
                "type": .string(session.type), "state": .string(session.state.rawValue),
            ]
            if let expiresAt = session.expiresAt { object["expiresAt"] = .string(expiresAt.rfc3339) }
            object["refreshable"] = .bool(session.refreshable)
            object["fromStore"] = .bool(session.fromStore)
            if let identity = session.identity {
                for (name, value) in LoginMethod.identityMembers(identity) { object[name] = value }
            }
            if let error = session.lastError { object["lastError"] = errorValue(error) }
            object["counters"] = [
                "acquisitions": .int(session.counters.acquisitions), "renewals": .int(session.counters.renewals),
                "recoveries": .int(session.counters.recoveries), "requests": .int(session.counters.requests),
            ]
            return .object(object)
        }

        /// `{kind, message}`.
        static func errorValue(_ error: (kind: ErrorKind, message: String)) -> JSONValue {
            ["kind": .string(error.kind.rawValue), "message": .string(error.message)]
        }

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(
            [
                "sessions": ["type": "array", "items": sessionSchema], "subscriptions": Schema.integer,
                "store": storeSchema,
            ],
            required: ["sessions", "subscriptions", "store"])
    }

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { try await context.tokens($0).status() }
    }

    static let sessionSchema = Schema.object(
        [
            "environment": Schema.string, "profile": Schema.string, "type": Schema.string, "state": Schema.string,
            "expiresAt": Schema.dateTime, "refreshable": Schema.boolean,
            "fromStore": [
                "type": "boolean",
                "description": "The held token was read from the store (obtained by an earlier or another process).",
            ],
            "lastError": Schema.error,
            "subject": Schema.string("Who is logged in (interactive OpenID Connect profiles)."),
            "email": Schema.string, "name": Schema.string,
            "counters": Schema.object([
                "acquisitions": Schema.integer, "renewals": Schema.integer, "recoveries": Schema.integer,
                "requests": Schema.integer,
            ]),
        ], required: ["environment", "profile", "type", "state", "refreshable", "fromStore", "counters"])

    static let storeSchema = Schema.object(
        [
            "type": Schema.oneOf(["memory", "sqlite"]), "path": Schema.string,
            "encrypted": ["type": "boolean", "description": "false: tokens are kept in plain text in the 0600 file."],
            "schemaVersion": Schema.integer, "error": Schema.error,
            "key": [
                "enum": ["secret_service", "encryption_key"],
                "description":
                    "What sealed the store: a key from the desktop's secret service, or store.encryption_key.",
            ],
            "note": Schema.string(
                "Which it is, in a sentence: sealed with a key from the secret service, or plain text and why."),
            "shared": Schema.object(
                [
                    "type": Schema.oneOf(["postgres"]),
                    "state": [
                        "enum": ["available", "unavailable"],
                        "description":
                            "unavailable: the shared tier failed, refused or was slower than its timeout; this host acts on its own until it answers again.",
                    ],
                    "since": Schema.string("When the tier became unavailable (RFC 3339)."),
                ], required: ["type", "state"]),
        ], required: ["type", "encrypted"])

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Per session: token state, expiry, refresh availability, whether the token came from the session store, last error, counters; and the store (type, path, encrypted, schema version). Never a token value.",
        result: Result.schema)
}
