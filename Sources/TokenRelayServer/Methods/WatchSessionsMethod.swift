import FoundationEssentials
import Synchronization
import TokenRelayAuth
import TokenRelayJSONRPC

/// The peer's watch of sessions (SPEC §13.1): which sessions it follows, and the signal that its
/// `watch-sessions` answer went out (no `session-changed` goes before it). One per server: a
/// second `watch-sessions` replaces the first's filter.
final class SessionWatchers: Sendable {
    /// Which sessions a watch follows (`nil`: every one).
    struct Watch: Sendable {
        let environment: String?
        let profile: String?
        let answered: OneShotSignal

        func follows(_ environment: String, _ profile: String) -> Bool {
            (self.environment == nil || self.environment == environment)
                && (self.profile == nil || self.profile == profile)
        }
    }

    /// Guarded by the mutex.
    private let current = Mutex<Watch?>(nil)

    /// Follows what `watch` names; returns whether a watch was under way already.
    func start(_ watch: Watch) -> Bool {
        current.withLock { current in
            defer { current = watch }
            return current != nil
        }
    }

    /// Ends the watch; returns whether there was one.
    func stop() -> Bool { current.withLock { $0.take() != nil } }

    /// The watch that follows `change`'s session, if any.
    func watch(for change: SessionChange) -> Watch? {
        current.withLock { $0 }.flatMap { $0.follows(change.environment, change.profile) ? $0 : nil }
    }
}

/// `watch-sessions {environment?, profile?}` (SPEC §13.1): every session's state now, as `status`
/// shows it, then a `session-changed` notification at each change of a session (those other
/// processes sharing the store make included), until `unwatch-sessions`.
package enum WatchSessionsMethod: RelayMethod {
    static let method = "watch-sessions"

    /// `{environment?, profile?}`: an environment's sessions, a profile's (of the default
    /// environment when none is named), or every session.
    typealias Params = SessionParams

    static func handle(_ params: Params, in context: MethodContext) async throws -> JSONValue {
        try await context.withRuntime { runtime in
            var environment = params.environment
            if environment != nil || params.profile != nil {
                let named = try runtime.environment(params.environment)
                environment = named.name
                if let profile = params.profile { _ = try runtime.profile(profile, in: named) }
            }
            let watch = SessionWatchers.Watch(
                environment: environment, profile: params.profile, answered: context.request.replyHandedOver)
            if !context.server.sessionWatchers.start(watch) { await runtime.manager.watchSessions() }
            return answer(try await context.tokens(runtime).status(), following: watch.follows)
        }
    }

    /// The answer: `{sessions}`, each followed session as `status` shows it.
    package static func answer(
        _ status: StatusMethod.Result, following follows: (String, String) -> Bool = { _, _ in true }
    ) -> JSONValue {
        let sessions = status.sessions.filter { follows($0.environment, $0.profile) }
        return ["sessions": .array(sessions.map { StatusMethod.Result.sessionValue($0) })]
    }

    /// The `session-changed` notification's params: never a token value.
    package static func changeParams(_ change: SessionChange) -> JSONValue {
        var object: JSONObject = [
            "environment": .string(change.environment), "profile": .string(change.profile),
            "state": .string(change.state.rawValue), "reason": .string(change.reason.rawValue),
        ]
        if let expiresAt = change.expiresAt { object["expiresAt"] = .string(expiresAt.rfc3339) }
        if let login = change.login {
            var prompt: JSONObject = [
                "kind": .string(login.kind.rawValue), "url": .string(login.url.value),
                "expiresAt": .string(login.expiresAt.rfc3339),
            ]
            if let code = login.userCode { prompt["userCode"] = .string(code.value) }
            if let complete = login.verificationURIComplete {
                prompt["verificationUriComplete"] = .string(complete.value)
            }
            object["login"] = .object(prompt)
        }
        return .object(object)
    }

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Every session's state now (as status shows it; of one environment or profile when named), then a session-changed notification at each change of a followed session, those other processes sharing the store make included, until unwatch-sessions. A second call replaces the first's choice. Never a token value.",
        params: [param("environment", Schema.string), param("profile", Schema.string)],
        result: Schema.object(
            ["sessions": ["type": "array", "items": StatusMethod.sessionSchema]], required: ["sessions"]))
}

/// `unwatch-sessions`: ends `watch-sessions`.
enum UnwatchSessionsMethod: RelayMethod {
    static let method = "unwatch-sessions"

    static func handle(_ params: NoParams, in context: MethodContext) async throws -> JSONValue {
        let stopped = context.server.sessionWatchers.stop()
        if stopped { await context.server.runtimes.current.manager.unwatchSessions() }
        return ["unwatched": .bool(stopped)]
    }

    static let openRPC = MethodDescription(
        name: method, summary: "Ends watch-sessions: no session-changed notification after this answer.",
        result: Schema.object(
            ["unwatched": ["type": "boolean", "description": "false: no watch was under way."]],
            required: ["unwatched"]))
}

/// `session-changed` (server to client, after `watch-sessions`): a session changed.
enum SessionChangedNotification: DescribedMethod {
    static let method = "session-changed"
    static let openRPC = MethodDescription.notification(
        method,
        "A followed session changed, in this process or another sharing the store, told once per change. reason: valid (acquired or renewed), login-required (with login when a login is under way), logged-in, logged-out, invalidated, refresh-failed, expired. state is the session's state as status shows it. Never a token value.",
        params: [
            param("environment", required: true, Schema.string), param("profile", required: true, Schema.string),
            param("state", required: true, Schema.string),
            param("reason", required: true, Schema.oneOf(SessionChange.Reason.allCases.map(\.rawValue))),
            param("expiresAt", Schema.dateTime),
            param(
                "login",
                Schema.object(
                    [
                        "kind": Schema.oneOf(["browser", "device"]), "url": Schema.string,
                        "userCode": Schema.string, "verificationUriComplete": Schema.string,
                        "expiresAt": Schema.dateTime,
                    ], required: ["kind", "url", "expiresAt"])),
        ], direction: .serverToClient)
}
