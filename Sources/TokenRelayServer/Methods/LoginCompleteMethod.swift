import TokenRelayAuth
import TokenRelayJSONRPC

/// `login-complete {environment?, profile?, url}` (SPEC §13.2): hands the login in progress the
/// URL the person's browser was redirected to, when that browser cannot reach the loopback
/// listener (SSH, a container). The URL gets every check a callback gets and is accepted once; the
/// listener keeps waiting meanwhile, and whichever comes first completes the login, whose `login`
/// call then answers. Answers `{accepted: true}`, or `invalid_params` (the login goes on).
package enum LoginCompleteMethod: RelayMethod {
    static let method = "login-complete"

    struct Params: MethodParams {
        var environment: String?
        var profile: String?
        var url: String

        init(decoding params: JSONValue?) throws(RPCError) {
            var reader = try ParamReader(params, allowed: ["environment", "profile", "url"])
            environment = reader.string("environment")
            profile = reader.string("profile")
            let url = reader.string("url", required: true)
            try reader.finish()
            guard let url else { throw RPCError.invalidParams(reader.diagnostics) }
            self.url = url
        }
    }

    static func handle(_ params: Params, in context: MethodContext) async throws -> JSONValue {
        try await context.withRuntime { runtime in
            try await complete(
                runtime: runtime, environment: params.environment, profile: params.profile, url: params.url)
        }
    }

    /// Hands `url` to the login of the named session (`tokenrelay login --paste` too).
    package static func complete(runtime: RelayRuntime, environment: String?, profile: String?, url: String)
        async throws -> JSONValue
    {
        let method = LoginMethod(runtime: runtime)
        let (_, profileRuntime) = try method.session(environment: environment, profile: profile)
        var key = profileRuntime.session
        if key == nil, let discovery = profileRuntime.discovery { key = try await discovery.key() }
        guard let key else { throw RPCError(code: .notSupported, message: "no session") }
        try await runtime.manager.completeLogin(key, pastedURL: url)
        return ["accepted": true]
    }

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Hands the authorization-code login in progress the whole URL the browser was redirected to, when that browser cannot reach the loopback listener (SSH, a container). Checked as the listener checks a callback (address, state, iss, error) and accepted once; the listener keeps waiting, and whichever comes first completes the login, whose login call then answers. A URL that is not the callback, or with no login waiting, is invalid_params and the login goes on.",
        params: [
            param("environment", Schema.string), param("profile", Schema.string),
            param("url", required: true, Schema.string),
        ],
        result: Schema.object(["accepted": Schema.boolean], required: ["accepted"]))
}
