import FoundationEssentials
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// One configured profile, ready to sign requests (one object per profile, shared by its
/// requests and kept across a reload that leaves it unchanged).
package final class ProfileRuntime: Sendable {
    package let name: String
    let typeName: String
    let exposeToken: Bool
    /// `nil` for a type this build cannot serve (interactive profiles): using it is an error.
    let credentials: (any CredentialSource)?
    /// The token-manager session, for OAuth profiles.
    package let session: SessionKey?
    /// The header the profile places its credential in (lower-cased), if any; a caller-supplied
    /// header of the same name is ambiguous and refused.
    let credentialHeader: String?
    /// Why the profile cannot be used, when `credentials` is nil.
    let unavailableReason: String?
    /// Query parameter names that carry a secret (for log redaction).
    let secretQueryParameters: [String]
    /// Header names that carry a secret (for log redaction).
    let secretHeaders: [String]
    /// The resolver of a `discover: true` profile (SPEC §9): its session is known once resolved.
    let discovery: ResourceAuthorization?

    init(
        name: String, typeName: String, exposeToken: Bool, credentials: (any CredentialSource)?,
        session: SessionKey?, credentialHeader: String?, unavailableReason: String?,
        secretQueryParameters: [String], secretHeaders: [String], discovery: ResourceAuthorization? = nil
    ) {
        self.discovery = discovery
        self.name = name
        self.typeName = typeName
        self.exposeToken = exposeToken
        self.credentials = credentials
        self.session = session
        self.credentialHeader = credentialHeader
        self.unavailableReason = unavailableReason
        self.secretQueryParameters = secretQueryParameters
        self.secretHeaders = secretHeaders
    }
}

extension ProfileRuntime {
    /// Refuses a request this profile cannot sign: the caller set the header the profile places
    /// its credential in (ambiguous), or the profile's type is not available in this build.
    func checkCanSign(_ headers: HTTPHeaders) throws(RPCError) {
        if let header = credentialHeader, headers.contains(header) {
            // The pointer names the member as the caller spelled it, so that it resolves in their params.
            let member = headers.fields.first { $0.name.caseInsensitiveEquals(header) }?.name ?? header
            throw RPCError.invalidParams([
                ParamDiagnostic(
                    pointer: ParamDiagnostic.pointer(["headers", member]),
                    reason: "profile '\(name)' sets \(header) itself; send with auth: false to set it yourself")
            ])
        }
        guard credentials != nil else {
            throw RPCError(code: .notSupported, message: unavailableReason ?? "profile unavailable")
        }
    }

    /// A secret that cannot be resolved says why (where it is declared, never a value), kind `config`.
    static func provider(_ source: SecretSource) -> SecretProvider {
        SecretProvider {
            do throws(SecretError) {
                return try await source.resolve()
            } catch {
                throw AuthError.secretUnavailable(error.description)
            }
        }
    }

    /// The OAuth client configuration of `settings`, a profile of `environment`; `nil` for a
    /// profile that is not OAuth. A token exchange's subject and actor profiles are keyed here
    /// from their own settings (the decoder refused cycles; `depth` bounds the walk anyway). A
    /// token request is bounded by the environment's `timeout`, as the requests it serves are.
    static func oauthConfiguration(_ settings: ProfileSettings, in environment: EnvironmentSettings, depth: Int = 0)
        -> OAuthClientConfiguration?
    {
        func configuration(_ client: OAuthClientSettings, grant: Grant) -> OAuthClientConfiguration {
            OAuthClientConfiguration(
                issuer: client.issuer, tokenURL: client.tokenURL, clientID: client.clientID,
                clientSecret: client.clientSecret.map(provider), clientAuth: clientAuth(client.clientAuth),
                clientKey: client.clientKey.map(clientKey), scopes: client.scopes, audience: client.audience,
                resources: client.resource,
                expirySkew: client.expirySkew, grant: grant, acquisitionTimeout: environment.timeout, dpop: client.dpop,
                clientCertificate: client.clientCertificate.map(provider), mtlsBound: client.mtlsBound)
        }
        switch settings.kind {
        case .clientCredentials(let client):
            return configuration(client, grant: .clientCredentials)
        case .refreshToken(let client, let seed):
            return configuration(client, grant: .refreshToken(seed: provider(seed)))
        case .authorizationCode(let client, let login):
            let flow = InteractiveLogin.Flow.authorizationCode(ports: login.redirectPorts, path: login.redirectPath)
            return configuration(client, grant: .interactive(interactiveLogin(login, flow: flow)))
        case .deviceCode(let client, let login):
            return configuration(client, grant: .interactive(interactiveLogin(login, flow: .deviceCode)))
        case .jwtBearer(let client, let assertion):
            let source: AssertionSource
            switch assertion {
            case .secret(let secret): source = .secret(provider(secret))
            case .githubActions(let audience, let url, let token):
                source = .githubActions(audience: audience, requestURL: provider(url), requestToken: provider(token))
            case .profile(let name):
                guard depth < 16, let other = environment.profile(named: name),
                    let configuration = oauthConfiguration(other, in: environment, depth: depth + 1)
                else { return nil }
                source = .session(environment: environment.name, profile: name, configuration: configuration)
            }
            return configuration(client, grant: .jwtBearer(source))
        case .tokenExchange(let client, let exchange):
            func source(_ token: TokenExchangeSettings.Token) -> TokenExchange.Source? {
                switch token {
                case .secret(let secret):
                    return .secret(provider(secret), description: secret.keyPath + "@" + secret.originDescription)
                case .profile(let name, let idToken):
                    guard depth < 16, let other = environment.profile(named: name),
                        let configuration = oauthConfiguration(other, in: environment, depth: depth + 1)
                    else { return nil }
                    let key = SessionKey(environment: environment.name, profile: name, configuration: configuration)
                    return idToken ? .sessionIDToken(key) : .session(key)
                }
            }
            guard let subject = source(exchange.subject) else { return nil }
            var actor: TokenExchange.Source?
            if let token = exchange.actor {
                guard let resolved = source(token) else { return nil }
                actor = resolved
            }
            return configuration(
                client,
                grant: .tokenExchange(
                    TokenExchange(
                        subject: subject, subjectTokenType: exchange.subjectTokenType,
                        requestedTokenType: exchange.requestedTokenType, actor: actor,
                        actorTokenType: exchange.actorTokenType)))
        case .apiKey, .basic, .bearer:
            return nil
        }
    }

    /// Builds the runtime of `settings`, registering OAuth sessions with `manager`.
    static func make(
        environment: EnvironmentSettings, settings: ProfileSettings, manager: TokenManager,
        resource: ResourceTarget? = nil
    ) async throws -> ProfileRuntime {
        if let resource,
            let discovered = discoveredRuntime(settings, environment: environment, manager: manager, resource: resource)
        {
            return discovered
        }
        if let configuration = oauthConfiguration(settings, in: environment) {
            let key = try await manager.register(
                environment: environment.name, profile: settings.name, configuration: configuration)
            return ProfileRuntime(
                name: settings.name, typeName: settings.typeName, exposeToken: settings.exposeToken,
                credentials: TokenCredentialSource(manager: manager, key: key), session: key,
                credentialHeader: "authorization", unavailableReason: nil, secretQueryParameters: [], secretHeaders: [])
        }
        func plain(_ credentials: any CredentialSource, header: String?, query: [String] = []) -> ProfileRuntime {
            ProfileRuntime(
                name: settings.name, typeName: settings.typeName, exposeToken: settings.exposeToken,
                credentials: credentials, session: nil, credentialHeader: header, unavailableReason: nil,
                secretQueryParameters: query, secretHeaders: header.map { [$0] } ?? [])
        }
        switch settings.kind {
        case .clientCredentials, .refreshToken, .authorizationCode, .deviceCode, .jwtBearer, .tokenExchange:
            throw AuthError.configuration("profile '\(settings.name)' has no OAuth client configuration")
        case .apiKey(.header(let name), let value):
            return plain(StaticCredentialSource(.apiKey(.header(name), provider(value))), header: name.lowercased())
        case .apiKey(.query(let name), let value):
            return plain(StaticCredentialSource(.apiKey(.query(name), provider(value))), header: nil, query: [name])
        case .basic(let username, let password):
            return plain(
                StaticCredentialSource(.basic(username: username, password: provider(password))),
                header: "authorization")
        case .bearer(let token, let cache):
            if token.isCommand {
                return plain(
                    FetchedBearerCredentialSource(fetcher: provider(token), cacheDuration: cache),
                    header: "authorization")
            }
            return plain(StaticCredentialSource(.bearer(provider(token))), header: "authorization")
        }
    }

    /// The Auth side of an interactive profile's settings; `open_browser` becomes a command run
    /// like a secret command (no shell, clean signal state, bounded in time).
    private static func interactiveLogin(_ login: InteractiveLoginSettings, flow: InteractiveLogin.Flow)
        -> InteractiveLogin
    {
        let argv: [String]?
        switch login.openBrowser {
        case .off: argv = nil
        case .system:
            #if os(macOS)
                argv = ["open"]
            #else
                argv = ["xdg-open"]
            #endif
        case .command(let command): argv = command
        }
        var opener: (@Sendable (String) async -> Void)?
        if let argv { opener = { url in await openBrowser(argv: argv, url: url) } }
        return InteractiveLogin(
            flow: flow, authorizationURL: login.authorizationURL, deviceAuthorizationURL: login.deviceAuthorizationURL,
            timeout: login.loginTimeout, authorizationParameters: login.authorizationParameters,
            tokenParameters: login.tokenParameters, openBrowser: opener)
    }

    /// Runs `argv URL`; a failure is only logged (the URL is in `auth-prompt` anyway).
    private static func openBrowser(argv: [String], url: String) async {
        do throws(SecretCommandError) {
            _ = try await ProcessCommandRunner().run(
                argv: argv + [url], environment: ProcessEnvironment.current(), timeout: .seconds(30))
        } catch {
            log.warn("open_browser: \(argv[0]) failed: \(error.description); open the URL from auth-prompt")
        }
    }

    package static func clientAuth(_ method: TokenRelayConfig.ClientAuthMethod) -> TokenRelayAuth.ClientAuthMethod {
        switch method {
        case .clientSecretBasic: .clientSecretBasic
        case .clientSecretPost: .clientSecretPost
        case .none: .none
        case .privateKeyJWT: .privateKeyJWT
        case .tlsClientAuth: .tlsClientAuth
        case .selfSignedTLSClientAuth: .selfSignedTLSClientAuth
        }
    }

    private static func clientKey(_ settings: ClientKeySettings) -> ClientKey {
        ClientKey(
            key: provider(settings.key), algorithm: settings.algorithm, keyID: settings.keyID,
            audience: settings.audience == .issuer ? .issuer : .tokenEndpoint)
    }
}
