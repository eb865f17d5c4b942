import FoundationEssentials
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging

/// Credential-helper mode (SPEC §4.5): `token-get`, and what `tokenrelay token` runs through
/// ``OneShot``. One path hands tokens out, whatever the format.
extension TokenMethods {
    /// `min_valid` when the caller gives none.
    package static let defaultMinimumValidity: Duration = .seconds(60)

    /// `token-get`: an access token, only for profiles with `expose_token: true`, in `format`
    /// (`json`, `header`, `exec-credential` with `apiVersion`), valid for at least `minValid`
    /// seconds.
    func tokenGet(_ params: TokenGetMethod.Params) async throws -> TokenGetMethod.Result {
        let issued = try await issue(
            environment: params.environment, profile: params.profile,
            minimumValidity: params.minimumValidity ?? Self.defaultMinimumValidity)
        return TokenGetMethod.Result(token: issued.token, format: params.format, version: params.version)
    }

    /// A token from the profile named `profile` of `environment` (or the defaults), valid for at
    /// least `minimumValidity`; the checks every credential-helper path makes.
    package func issue(environment environmentName: String?, profile profileName: String?, minimumValidity: Duration)
        async throws -> (token: Token, profile: ProfileRuntime, environment: EnvironmentRuntime)
    {
        let environment = try runtime.environment(environmentName)
        guard let profile = try runtime.profile(profileName, in: environment) else {
            throw RPCError(code: .unknownProfile, message: "environment '\(environment.name)' has no profiles")
        }
        guard profile.exposeToken else {
            throw RPCError(
                code: .notSupported,
                message:
                    "profile '\(profile.name)' does not expose its token (set expose_token: true to allow token-get)")
        }
        guard let key = profile.session else {
            if let source = profile.credentials as? any BearerTokenSource, let value = try await source.bearerToken() {
                // A `bearer` profile: its token as configured or fetched, of unknown expiry.
                guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw RPCError(
                        code: .config,
                        message: "the bearer token of profile '\(profile.name)' has characters a header cannot carry")
                }
                return (Token(accessToken: value, receivedAt: Date(), expiresAt: nil, version: 0), profile, environment)
            }
            if environment.settings.profile(named: profile.name)?.isInteractive == true {
                // A credential helper runs inside another tool: it never starts a login.
                throw RPCError(
                    code: .interactionRequired,
                    message:
                        "profile '\(profile.name)' (\(profile.typeName)) needs an interactive login first: "
                        + "run tokenrelay login --env \(environment.name) --profile \(profile.name)")
            }
            throw RPCError(
                code: .notSupported, message: "profile '\(profile.name)' (\(profile.typeName)) has no access token")
        }
        let deadline = Date().addingTimeInterval(environment.settings.timeout.timeIntervalValue)
        let token = try await runtime.manager.token(for: key, deadline: deadline, minimumValidity: minimumValidity)
        guard !token.isBound else {
            // SPEC §10: a DPoP-bound token is useless without the key, which never leaves tokenrelay.
            throw RPCError(
                code: .notSupported,
                message:
                    "profile '\(profile.name)' gets bound tokens (DPoP or a client certificate): they are useless "
                    + "without a key that never leaves tokenrelay, so they are not handed out; send the requests "
                    + "through tokenrelay (request, call)")
        }
        return (token, profile, environment)
    }

    /// One git credential-helper operation (`get`, `store`, `erase`; others are ignored, as
    /// git-credential(1) asks). Returns what to print: the answer to a `get` whose protocol and
    /// host (and path) an environment's `base_url` matches, and nothing otherwise: never the
    /// default environment. `environment` restricts the candidates to one environment.
    package func gitCredential(
        action: String, request: GitCredentialRequest, environment: String?, profile: String?,
        minimumValidity: Duration
    ) async throws -> String {
        guard action == "get" || action == "erase" else { return "" }
        guard let environment = try matchingEnvironment(request, restrictedTo: environment) else { return "" }
        switch action {
        case "get":
            let issued = try await issue(
                environment: environment.name, profile: profile, minimumValidity: minimumValidity)
            let username =
                environment.settings.profile(named: issued.profile.name)?.gitUsername
                ?? ProfileSettings.defaultGitUsername
            return GitCredentialMatch.answer(
                username: username, password: issued.token.accessToken, expiresAt: issued.token.expiresAt) ?? ""
        default:
            guard let password = request["password"], let chosen = try runtime.profile(profile, in: environment),
                chosen.exposeToken, let key = chosen.session
            else { return "" }
            if try await runtime.manager.invalidate(key, ifAccessToken: password) {
                log.info("git rejected the token of \(environment.name)/\(chosen.name): invalidated")
            }
            return ""
        }
    }

    /// The environment whose `base_url` matches the request most specifically (config order
    /// breaks ties), or `nil`.
    private func matchingEnvironment(_ request: GitCredentialRequest, restrictedTo name: String?) throws
        -> EnvironmentRuntime?
    {
        var candidates = runtime.settings.environments
        if let name {
            _ = try runtime.environment(name)
            candidates = candidates.filter { $0.name == name }
        }
        var best: (environment: String, specificity: Int)?
        for settings in candidates {
            switch GitCredentialMatch.match(request, baseURL: settings.baseURL) {
            case .matches(let specificity):
                if specificity > best?.specificity ?? -1 { best = (settings.name, specificity) }
            case .pathRequired:
                log.warn(
                    "environment '\(settings.name)' has a base_url path, and git sent none: "
                        + "set git config credential.useHttpPath true for tokenrelay to answer")
            case .none:
                break
            }
        }
        guard let best else { return nil }
        return try runtime.environment(best.environment)
    }
}
