import Auth
import Foundation
import JSONRPC

/// `login {environment?, profile?}` (SPEC §5.4): starts or joins the interactive login of a
/// session and answers once it is stored.
struct LoginMethod: Sendable {
    let runtime: RelayRuntime

    func handle(_ params: JSONValue?) async throws -> JSONValue {
        var reader = try ParamReader(params, allowed: ["environment", "profile"])
        let environmentName = reader.string("environment")
        let profileName = reader.string("profile")
        try reader.finish()
        let (environment, profile) = try session(environment: environmentName, profile: profileName)
        let result = try await perform(environment: environment, profile: profile, openBrowser: true)
        return Self.resultValue(result, environment: environment.name, profile: profile.name)
    }

    /// The environment and interactive profile named (or the defaults).
    func session(environment name: String?, profile profileName: String?) throws(RPCError) -> (
        EnvironmentRuntime, ProfileRuntime
    ) {
        let environment = try runtime.environment(name)
        guard let profile = try runtime.profile(profileName, in: environment) else {
            throw RPCError(code: .unknownProfile, message: "environment '\(environment.name)' has no profiles")
        }
        guard profile.session != nil, profile.typeName == "authorization_code" || profile.typeName == "device_code"
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
    func perform(environment: EnvironmentRuntime, profile: ProfileRuntime, openBrowser: Bool) async throws
        -> LoginResult
    {
        guard let key = profile.session else { throw RPCError(code: .notSupported, message: "no session") }
        return try await runtime.manager.login(key, openBrowser: openBrowser)
    }

    /// The `login` result.
    static func resultValue(_ result: LoginResult, environment: String, profile: String) -> JSONValue {
        var object: JSONObject = ["environment": .string(environment), "profile": .string(profile), "loggedIn": true]
        if let expiresAt = result.expiresAt {
            object["expiresAt"] = .string(ISO8601DateFormatter().string(from: expiresAt))
        }
        if let identity = result.identity { for (name, value) in identityMembers(identity) { object[name] = value } }
        return .object(object)
    }

    /// `subject`, `email`, `name`.
    static func identityMembers(_ identity: LoginIdentity) -> JSONObject {
        var object: JSONObject = ["subject": .string(identity.subject)]
        if let email = identity.email { object["email"] = .string(email) }
        if let name = identity.name { object["name"] = .string(name) }
        return object
    }

    /// The `auth-prompt` notification params.
    static func promptParams(_ prompt: LoginPrompt) -> JSONValue {
        var object: JSONObject = [
            "environment": .string(prompt.environment), "profile": .string(prompt.profile),
            "kind": .string(prompt.kind.rawValue), "url": .string(prompt.url),
            "expiresAt": .string(ISO8601DateFormatter().string(from: prompt.expiresAt)),
        ]
        if let code = prompt.userCode { object["userCode"] = .string(code) }
        if let complete = prompt.verificationURIComplete { object["verificationUriComplete"] = .string(complete) }
        return .object(object)
    }
}
