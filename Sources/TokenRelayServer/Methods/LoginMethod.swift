import FoundationEssentials
import TokenRelayAuth
import TokenRelayJSONRPC
import TokenRelayLogging

/// `login {environment?, profile?}` (SPEC §5.4): starts or joins the interactive login of a
/// session and answers once it is stored.
package struct LoginMethod: Sendable {
    let runtime: RelayRuntime

    package init(runtime: RelayRuntime) { self.runtime = runtime }

    /// `{environment?, profile?}`.
    typealias Params = SessionParams

    func handle(_ params: Params) async throws -> Result {
        let (environment, profile) = try session(environment: params.environment, profile: params.profile)
        let login = try await perform(environment: environment, profile: profile, openBrowser: true)
        return Result(login, environment: environment.name, profile: profile.name)
    }

    /// The environment and interactive profile named (or the defaults).
    package func session(environment name: String?, profile profileName: String?) throws(RPCError) -> (
        EnvironmentRuntime, ProfileRuntime
    ) {
        let environment = try runtime.environment(name)
        guard let profile = try runtime.profile(profileName, in: environment) else {
            throw RPCError(code: .unknownProfile, message: "environment '\(environment.name)' has no profiles")
        }
        guard profile.session != nil || profile.discovery != nil,
            profile.typeName == "authorization_code" || profile.typeName == "device_code"
        else {
            throw RPCError(
                code: .notSupported,
                message:
                    "profile '\(profile.name)' (\(profile.typeName)) does not log in interactively; only authorization_code and device_code profiles do"
            )
        }
        return (environment, profile)
    }

    /// Runs the login of `profile`.
    package func perform(environment: EnvironmentRuntime, profile: ProfileRuntime, openBrowser: Bool) async throws
        -> LoginResult
    {
        var key = profile.session
        if key == nil, let discovery = profile.discovery { key = try await discovery.key() }
        guard let key else { throw RPCError(code: .notSupported, message: "no session") }
        return try await runtime.manager.login(key, openBrowser: openBrowser)
    }

    /// `{environment, profile, loggedIn: true, expiresAt?, subject?, email?, name?}`: the session
    /// is stored.
    package struct Result: MethodResult, Equatable {
        /// The environment logged in to.
        var environment: String
        /// The profile logged in with.
        var profile: String
        /// The access token's expiry; `nil` when the token server gave no `expires_in`.
        var expiresAt: Date?
        /// Who logged in (OpenID Connect profiles).
        var identity: LoginIdentity?

        /// A result of the members given.
        init(environment: String, profile: String, expiresAt: Date? = nil, identity: LoginIdentity? = nil) {
            self.environment = environment
            self.profile = profile
            self.expiresAt = expiresAt
            self.identity = identity
        }

        /// The result of `login` for that session.
        package init(_ login: LoginResult, environment: String, profile: String) {
            self.init(environment: environment, profile: profile, expiresAt: login.expiresAt, identity: login.identity)
        }

        package var resultValue: JSONValue {
            var object: JSONObject = [
                "environment": .string(environment), "profile": .string(profile), "loggedIn": true,
            ]
            if let expiresAt { object["expiresAt"] = .string(expiresAt.rfc3339) }
            if let identity { for (name, value) in identityMembers(identity) { object[name] = value } }
            return .object(object)
        }

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(
            [
                "environment": Schema.string, "profile": Schema.string, "loggedIn": ["const": true],
                "expiresAt": Schema.dateTime,
                "subject": Schema.string("OpenID Connect: the validated ID token's sub."),
                "email": Schema.string, "name": Schema.string,
            ], required: ["environment", "profile", "loggedIn"])
    }

    /// `subject`, `email`, `name` (the server's text, cleaned: ``LoginIdentity``).
    static func identityMembers(_ identity: LoginIdentity) -> JSONObject {
        var object: JSONObject = ["subject": .string(identity.subject.value)]
        if let email = identity.email { object["email"] = .string(email.value) }
        if let name = identity.name { object["name"] = .string(name.value) }
        return object
    }

    /// The `auth-prompt` notification params.
    package static func promptParams(_ prompt: LoginPrompt) -> JSONValue {
        var object: JSONObject = [
            "environment": .string(prompt.environment), "profile": .string(prompt.profile),
            "kind": .string(prompt.kind.rawValue), "url": .string(prompt.url.value),
            "expiresAt": .string(prompt.expiresAt.rfc3339),
        ]
        if let code = prompt.userCode { object["userCode"] = .string(code.value) }
        if let complete = prompt.verificationURIComplete {
            object["verificationUriComplete"] = .string(complete.value)
        }
        return .object(object)
    }
}

extension LoginMethod: RelayMethod {
    static let method = "login"

    static func handle(_ params: Params, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { try await LoginMethod(runtime: $0).handle(params) }
    }

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Starts (or joins) the interactive login of a session (authorization code + PKCE with a loopback redirect, or device code) and answers once the session is stored; what the person must do comes as one auth-prompt notification. One login per session at a time: concurrent callers join it. At most 3 failed logins per session per 10 minutes, then kind limit. Bounded by the profile's login_timeout (then interaction_required); $/cancelRequest ends it (the last caller leaving stops the listener or the polling).",
        params: SharedParams.session,
        result: Result.schema,
        errors: [
            .config, .unknownEnvironment, .unknownProfile, .auth, .interactionRequired, .transport, .timeout, .limit,
            .notSupported, .loggedOut, .store,
        ] + MethodDescription.standardErrors)
}

/// `auth-prompt` (server to client): what the person must do to log in (``LoginMethod/promptParams(_:)``).
enum AuthPromptNotification: DescribedMethod {
    static let method = "auth-prompt"
    static let openRPC = MethodDescription.notification(
        method,
        "What the person must do to log in: open url in a browser (kind browser), or open url and enter userCode (kind device). Sent once per login, however many callers joined it. The URL carries state, nonce and the PKCE challenge, never a secret. tokenrelay never reads the terminal and opens a browser only when the profile's open_browser says so.",
        params: [
            param("environment", required: true, Schema.string), param("profile", required: true, Schema.string),
            param("kind", required: true, Schema.oneOf(["browser", "device"])),
            param("url", required: true, Schema.string),
            param("userCode", Schema.string), param("verificationUriComplete", Schema.string),
            param("expiresAt", required: true, Schema.dateTime),
        ], direction: .serverToClient)
}
