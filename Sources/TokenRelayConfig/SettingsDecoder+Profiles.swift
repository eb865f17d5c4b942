extension SettingsDecoder {
    mutating func decodeProfile(name: String, node: YAMLNode, path: String) -> ProfileSettings? {
        guard node.pairs != nil else {
            var message =
                node.isNull
                ? "profile '\(name)' is empty: it needs at least a 'type' (are the lines below it indented under it?)"
                : "profile '\(name)' must be a mapping with at least a 'type', found \(node.kindDescription)"
            if Self.profileKeys.values.contains(where: { $0.contains(name) }) {
                message += "; '\(name)' is a profile setting: indent it under its profile"
            }
            sink.error(message, at: node.mark)
            return nil
        }
        guard let typePair = node.pairs?.first(where: { $0.key.scalar?.value == "type" }) else {
            sink.error(
                "profile '\(name)' needs a 'type': one of \(Self.profileTypes.joined(separator: ", "))", at: node.mark)
            return nil
        }
        guard let type = choice(typePair.value, path: "\(path).type", choices: Self.profileTypes),
            let allowed = Self.profileKeys[type]
        else { return nil }
        let context = "profile '\(name)' (type \(type))"
        guard
            let keys = fields(
                node, path: path, context: context, allowed: allowed,
                unknownHint: { key in
                    if key == "redirect_port" {
                        return "'redirect_port' was replaced by 'redirect: { port: N }' (a number, 0 or a list)"
                    }
                    let owners = Self.profileTypes.filter { Self.profileKeys[$0]?.contains(key) == true }
                    return owners.isEmpty
                        ? nil : "'\(key)' applies to \(owners.joined(separator: ", ")) profiles, not \(type)"
                })
        else { return nil }

        var exposeToken = false
        if let pair = keys["expose_token"], let value = boolean(pair.value, path: "\(path).expose_token") {
            exposeToken = value
        }

        var gitUsername = ProfileSettings.defaultGitUsername
        if let pair = keys["git_username"], let value = nonEmptyString(pair.value, path: "\(path).git_username") {
            // It becomes a `username=` line of the git credential protocol: a control character
            // would end or forge a line.
            if value.text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                sink.error(
                    "'\(path).git_username' must not contain control characters (newlines, tabs)", at: pair.value.mark)
            } else {
                gitUsername = value.text
            }
        }

        let kind: ProfileKind?
        switch type {
        case "client_credentials":
            kind = decodeOAuth(keys, node: node, path: path).map { .clientCredentials($0) }
        case "refresh_token":
            let client = decodeOAuth(keys, node: node, path: path)
            var seed: SecretSource?
            if let pair = keys["refresh_token"] {
                seed = secretSource(pair.value, path: "\(path).refresh_token")
            } else {
                sink.error(
                    "profile '\(name)' of type refresh_token needs a 'refresh_token' secret source (the seed)",
                    at: node.mark)
            }
            if let client, let seed { kind = .refreshToken(client, refreshToken: seed) } else { kind = nil }
        case "authorization_code":
            let client = decodeOAuth(keys, node: node, path: path)
            var login = decodeInteractive(keys, path: path)
            login.authorizationURL = keys["authorization_url"].flatMap {
                endpointURL($0.value, path: "\(path).authorization_url")
            }
            if let pair = keys["redirect"] { decodeRedirect(pair.value, path: "\(path).redirect", into: &login) }
            kind = client.map { .authorizationCode($0, login) }
        case "device_code":
            let client = decodeOAuth(keys, node: node, path: path)
            var login = decodeInteractive(keys, path: path)
            login.deviceAuthorizationURL = keys["device_authorization_url"].flatMap {
                endpointURL($0.value, path: "\(path).device_authorization_url")
            }
            kind = client.map { .deviceCode($0, login) }
        case "jwt_bearer":
            let client = decodeOAuth(keys, node: node, path: path)
            var assertion: AssertionSettings?
            if let pair = keys["assertion"] {
                assertion = decodeAssertion(pair.value, path: "\(path).assertion", name: name)
            } else {
                sink.error(
                    "profile '\(name)' of type jwt_bearer needs an 'assertion': a secret source holding the JWT, "
                        + "{ github_actions: { audience: ... } } or { profile: NAME }",
                    at: node.mark)
            }
            if let client, let assertion { kind = .jwtBearer(client, assertion: assertion) } else { kind = nil }
        case "token_exchange":
            let client = decodeOAuth(keys, node: node, path: path)
            let exchange = decodeExchange(keys, node: node, path: path, name: name)
            if let client, let exchange { kind = .tokenExchange(client, exchange) } else { kind = nil }
        case "api_key":
            kind = decodeAPIKey(keys, node: node, path: path, name: name)
        case "basic":
            var username: String?
            if let pair = keys["username"] {
                username = nonEmptyString(pair.value, path: "\(path).username")?.text
            } else {
                sink.error("profile '\(name)' of type basic needs a 'username'", at: node.mark)
            }
            let password = required("password", in: keys, node: node, path: path, name: name, type: type)
            if let username, let password { kind = .basic(username: username, password: password) } else { kind = nil }
        default:  // bearer
            let token = required("token", in: keys, node: node, path: path, name: name, type: type)
            var cache: Duration?
            if let pair = keys["cache"] {
                cache = duration(pair.value, path: "\(path).cache")
                if let token, !token.isCommand {
                    sink.warning(
                        "'\(path).cache' only matters when the token comes from a { command: [...] } source",
                        at: pair.key.mark)
                }
            }
            kind = token.map { .bearer(token: $0, cache: cache) }
        }
        let mcp = keys["mcp"].flatMap { decodeMCP($0.value, path: "\(path).mcp", owner: "profile '\(name)'") }
        guard let kind else { return nil }
        var profile = ProfileSettings(
            name: name, typeName: type, exposeToken: exposeToken, gitUsername: gitUsername, kind: kind, mark: node.mark)
        profile.mcp = mcp
        return profile
    }

    /// `open_browser`, `login_timeout` and `parameters` of an interactive profile.
    private mutating func decodeInteractive(_ keys: Fields, path: String) -> InteractiveLoginSettings {
        var login = InteractiveLoginSettings()
        if let pair = keys["login_timeout"], let value = duration(pair.value, path: "\(path).login_timeout") {
            login.loginTimeout = value
        }
        if let pair = keys["open_browser"] {
            if pair.value.items != nil {
                if let argv = stringList(pair.value, path: "\(path).open_browser") {
                    if argv.isEmpty {
                        sink.error("'\(path).open_browser' must name a program", at: pair.value.mark)
                    } else {
                        login.openBrowser = .command(argv)
                    }
                }
            } else if let value = boolean(pair.value, path: "\(path).open_browser") {
                login.openBrowser = value ? .system : .off
            }
        }
        if let pair = keys["parameters"],
            let categories = fields(
                pair.value, path: "\(path).parameters", context: "'\(path).parameters'",
                allowed: Self.parameterCategories)
        {
            for (category, entry) in categories.entries.sorted(by: { $0.0 < $1.0 }) {
                let categoryPath = "\(path).parameters.\(category)"
                guard let pairs = fields(entry.value, path: categoryPath, context: "'\(categoryPath)'", allowed: nil)
                else { continue }
                var list: [(String, String)] = []
                for (name, parameter) in pairs.entries {
                    guard
                        let value = self.scalar(
                            parameter.value, path: "\(categoryPath).\(name)", expected: "a string parameter value")
                    else { continue }
                    if Self.reservedParameters.contains(name) {
                        sink.error(
                            "'\(categoryPath).\(name)' is set by tokenrelay itself and cannot be overridden",
                            at: parameter.key.mark)
                        continue
                    }
                    list.append((name, value.text))
                }
                if category == "authorization" {
                    login.authorizationParameters = list
                } else {
                    login.tokenParameters = list
                }
            }
        }
        return login
    }

    /// Parameters tokenrelay sends itself (PKCE, state, client authentication, the grant).
    static let reservedParameters: Set<String> = [
        "response_type", "client_id", "client_secret", "redirect_uri", "state", "nonce", "code_challenge",
        "code_challenge_method", "code", "code_verifier", "grant_type", "device_code", "refresh_token",
    ]

    /// `redirect: { port: 0 | N | [N...], path: /callback }`.
    private mutating func decodeRedirect(_ node: YAMLNode, path: String, into login: inout InteractiveLoginSettings) {
        guard let keys = fields(node, path: path, context: "'\(path)'", allowed: Self.redirectKeys) else { return }
        if let pair = keys["port"] {
            if let items = pair.value.items {
                var ports: [Int] = []
                for (index, item) in items.enumerated() {
                    if let port = integer(item, path: "\(path).port[\(index)]", range: 0...65535) { ports.append(port) }
                }
                if items.isEmpty { sink.error("'\(path).port' must list at least one port", at: pair.value.mark) }
                if !ports.isEmpty { login.redirectPorts = ports }
            } else if let port = integer(pair.value, path: "\(path).port", range: 0...65535) {
                login.redirectPorts = [port]
            }
        }
        if let pair = keys["path"], let value = nonEmptyString(pair.value, path: "\(path).path") {
            if !value.text.hasPrefix("/") || value.text.contains("?") || value.text.contains("#")
                || value.text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
            {
                sink.error(
                    "'\(path).path' must be an absolute path like /callback (no query, fragment or spaces)",
                    at: pair.value.mark)
            } else {
                login.redirectPath = value.text
            }
        }
    }

    /// A required secret-source key.
    private mutating func required(
        _ key: String, in keys: Fields, node: YAMLNode, path: String, name: String, type: String
    ) -> SecretSource? {
        guard let pair = keys[key] else {
            sink.error(
                "profile '\(name)' of type \(type) needs '\(key)' (a secret source: { env: NAME }, { file: path } or { command: [argv] })",
                at: node.mark)
            return nil
        }
        return secretSource(pair.value, path: "\(path).\(key)")
    }

    private mutating func decodeAPIKey(_ keys: Fields, node: YAMLNode, path: String, name: String)
        -> ProfileKind?
    {
        var placement: APIKeyPlacement?
        switch (keys["header"], keys["query"]) {
        case (let header?, nil):
            if let value = nonEmptyString(header.value, path: "\(path).header") {
                if !value.unresolved, let problem = ValueSyntax.headerNameProblem(value.text) {
                    sink.error("'\(path).header' \(value.quoted) \(problem)", at: header.value.mark)
                }
                placement = .header(value.text)
            }
        case (nil, let query?):
            placement = nonEmptyString(query.value, path: "\(path).query").map { .query($0.text) }
        case (.some, .some(let query)):
            sink.error(
                "profile '\(name)' sets both 'header' and 'query'; an api_key goes in exactly one place",
                at: query.key.mark)
        case (nil, nil):
            sink.error(
                "profile '\(name)' of type api_key needs 'header' (a header name) or 'query' (a query parameter name)",
                at: node.mark)
        }
        let value = required("value", in: keys, node: node, path: path, name: name, type: "api_key")
        guard let placement, let value else { return nil }
        return .apiKey(placement: placement, value: value)
    }

    private mutating func decodeOAuth(_ keys: Fields, node: YAMLNode, path: String) -> OAuthClientSettings? {
        let issuer = keys["issuer"].flatMap { endpointURL($0.value, path: "\(path).issuer") }
        let tokenURL = keys["token_url"].flatMap { endpointURL($0.value, path: "\(path).token_url") }
        let discovery = decodeDiscovery(keys, path: path)
        if keys["issuer"] == nil && keys["token_url"] == nil && discovery == nil {
            sink.error(
                "an OAuth profile needs 'issuer' (for discovery), 'token_url' (or both), or 'discover: true'",
                at: node.mark)
        }
        var clientID: String?
        if let pair = keys["client_id"] {
            clientID = nonEmptyString(pair.value, path: "\(path).client_id")?.text
        } else if discovery != nil && isAuthorizationCode(node) {
            clientID = ""  // registers itself (SPEC §9.4)
        } else if profileType(node) == "jwt_bearer" {
            // RFC 7523 §3.1: client authentication is optional for this grant (SPEC §10); the token
            // request then names no client. Whatever would authenticate one needs its id.
            clientID = ""
            for name in ["client_secret", "client_key", "client_cert"] {
                if let pair = keys[name] {
                    sink.error("'\(path).\(name)' authenticates a client: it needs a 'client_id'", at: pair.key.mark)
                }
            }
            if let pair = keys["client_auth"], pair.value.scalar?.value != ClientAuthMethod.none.rawValue {
                sink.error("'\(path).client_auth' authenticates a client: it needs a 'client_id'", at: pair.key.mark)
            }
        } else {
            sink.error(
                "an OAuth profile needs a 'client_id' (only a discovered authorization_code profile registers itself, "
                    + "and a jwt_bearer profile may name no client)",
                at: node.mark)
        }
        let secret = keys["client_secret"].flatMap { secretSource($0.value, path: "\(path).client_secret") }
        var clientAuth: ClientAuthMethod?
        if let pair = keys["client_auth"],
            let value = choice(
                pair.value, path: "\(path).client_auth", choices: ClientAuthMethod.allCases.map(\.rawValue))
        {
            clientAuth = ClientAuthMethod(rawValue: value)
            switch clientAuth {
            case .none?:
                if keys["client_secret"] != nil {
                    sink.error(
                        "'client_auth: none' sends no secret, but 'client_secret' is set; remove one of them",
                        at: pair.value.mark)
                }
            case .privateKeyJWT?:
                if keys["client_key"] == nil {
                    sink.error(
                        "'client_auth: private_key_jwt' needs a 'client_key' (a PEM private key secret source)",
                        at: pair.value.mark)
                }
            case .tlsClientAuth?, .selfSignedTLSClientAuth?:
                if keys["client_cert"] == nil || keys["client_key"] == nil {
                    sink.error(
                        "'client_auth: \(value)' needs a 'client_cert' (a PEM certificate) and a 'client_key' "
                            + "(its PEM private key)", at: pair.value.mark)
                }
                if keys["client_secret"] != nil {
                    sink.error(
                        "'client_auth: \(value)' authenticates with the certificate; remove 'client_secret'",
                        at: pair.value.mark)
                }
            default:
                if keys["client_secret"] == nil {
                    sink.error("'client_auth: \(value)' needs a 'client_secret'", at: pair.value.mark)
                }
            }
        }
        let clientKey = decodeClientKey(keys, path: path, clientAuth: clientAuth)
        let scopes =
            keys["scopes"].flatMap { stringList($0.value, path: "\(path).scopes", splittingString: true) } ?? []
        let audience = keys["audience"].flatMap { nonEmptyString($0.value, path: "\(path).audience")?.text }
        let resource =
            keys["resource"].flatMap { stringList($0.value, path: "\(path).resource", splittingString: true) } ?? []
        let skew =
            keys["expiry_skew"].flatMap { duration($0.value, path: "\(path).expiry_skew", allowZero: true) }
            ?? .seconds(30)
        guard let clientID else { return nil }
        var settings = OAuthClientSettings(
            issuer: issuer, tokenURL: tokenURL, clientID: clientID, clientSecret: secret, clientAuth: clientAuth,
            clientKey: clientKey, scopes: scopes, audience: audience, resource: resource, expirySkew: skew)
        settings.discovery = discovery
        settings.dpop = keys["dpop"].flatMap { boolean($0.value, path: "\(path).dpop") } ?? false
        if discovery != nil {
            // A discovered session is built from the resource's metadata (SPEC §9), which carries
            // neither a DPoP key nor a client certificate yet: refused rather than sent as bearer.
            for name in ["dpop", "client_cert", "mtls_bound"] {
                if let pair = keys[name] {
                    sink.error("'\(path).\(name)' is not supported with 'discover: true' yet", at: pair.key.mark)
                }
            }
            if let clientAuth, clientAuth.isMutualTLS, let pair = keys["client_auth"] {
                sink.error(
                    "'client_auth: \(clientAuth.rawValue)' is not supported with 'discover: true' yet",
                    at: pair.value.mark)
            }
        }
        if let pair = keys["client_cert"] {
            if clientAuth?.isMutualTLS != true {
                sink.error(
                    "'\(path).client_cert' is used by 'client_auth: tls_client_auth' (or self_signed_tls_client_auth)",
                    at: pair.key.mark)
            }
            settings.clientCertificate = secretSource(
                pair.value, path: "\(path).client_cert", format: .pemCertificate)
        }
        if let pair = keys["mtls_bound"], let value = boolean(pair.value, path: "\(path).mtls_bound") {
            if value, clientAuth?.isMutualTLS != true {
                sink.error("'\(path).mtls_bound' needs a mutual-TLS 'client_auth'", at: pair.key.mark)
            }
            settings.mtlsBound = value
        }
        if discovery?.resourceIndicator == false || resourceIndicatorOff(keys, path: path) { settings.resource = [] }
        return settings
    }

    /// `subject`/`subject_token`, `actor`/`actor_token`, the token types (RFC 8693 §2.1).
    private mutating func decodeExchange(_ keys: Fields, node: YAMLNode, path: String, name: String)
        -> TokenExchangeSettings?
    {
        func token(_ role: String) -> TokenExchangeSettings.Token?? {
            switch (keys[role], keys["\(role)_token"]) {
            case (nil, nil):
                return .some(nil)
            case (.some, .some(let second)):
                sink.error(
                    "set '\(role)' (a profile) or '\(role)_token' (a secret source), not both", at: second.key.mark)
                return nil
            case (let pair?, nil):
                let rolePath = "\(path).\(role)"
                guard
                    let fields = fields(
                        pair.value, path: rolePath, context: "'\(rolePath)'", allowed: Self.exchangeProfileKeys)
                else { return nil }
                guard let entry = fields["profile"],
                    let profile = nonEmptyString(entry.value, path: "\(rolePath).profile")
                else {
                    sink.error("'\(rolePath)' needs { profile: NAME }", at: pair.value.mark)
                    return nil
                }
                if profile.text == name {
                    sink.error("profile '\(name)' cannot exchange its own token", at: entry.value.mark)
                    return nil
                }
                var idToken = false
                if let kind = fields["token"] {
                    guard
                        let value = choice(
                            kind.value, path: "\(rolePath).token", choices: Self.exchangeProfileTokens)
                    else { return nil }
                    idToken = value == "id_token"
                }
                return .some(.profile(profile.text, idToken: idToken))
            case (nil, let pair?):
                return secretSource(pair.value, path: "\(path).\(role)_token").map { .some(.secret($0)) }
            }
        }
        func type(_ key: String) -> String? {
            guard let pair = keys[key], let value = nonEmptyString(pair.value, path: "\(path).\(key)") else {
                return nil
            }
            return value.text.contains(":") ? value.text : TokenExchangeSettings.typePrefix + value.text
        }
        guard let subject = token("subject") else { return nil }
        guard let subject else {
            sink.error(
                "profile '\(name)' of type token_exchange needs 'subject: { profile: NAME }' or 'subject_token' "
                    + "(a secret source)", at: node.mark)
            return nil
        }
        guard let actor = token("actor") else { return nil }
        var settings = TokenExchangeSettings(
            subject: subject, requestedTokenType: type("requested_token_type"), actor: actor)
        // An ID token is presented as one (RFC 8693 §3) unless the type is written.
        if case .profile(_, idToken: true) = subject { settings.subjectTokenType = TokenExchangeSettings.idTokenType }
        if case .profile(_, idToken: true)? = actor { settings.actorTokenType = TokenExchangeSettings.idTokenType }
        if let value = type("subject_token_type") { settings.subjectTokenType = value }
        if let value = type("actor_token_type") { settings.actorTokenType = value }
        if actor == nil, let stray = keys["actor_token_type"] {
            sink.error("'\(path).actor_token_type' only applies with an actor", at: stray.key.mark)
        }
        return settings
    }

    /// `assertion`: a secret source, `{ github_actions: { audience } }` or `{ profile: P }`.
    private mutating func decodeAssertion(_ node: YAMLNode, path: String, name: String) -> AssertionSettings? {
        if node.pairs?.contains(where: { $0.key.scalar?.value == "profile" }) == true {
            guard
                let keys = fields(node, path: path, context: "'\(path)'", allowed: Self.assertionProfileKeys),
                let entry = keys["profile"], let profile = nonEmptyString(entry.value, path: "\(path).profile")
            else { return nil }
            if profile.text == name {
                sink.error("profile '\(name)' cannot take its own token as its assertion", at: entry.value.mark)
                return nil
            }
            return .profile(profile.text)
        }
        guard let actions = node.pairs?.first(where: { $0.key.scalar?.value == "github_actions" }) else {
            return secretSource(node, path: path).map { .secret($0) }
        }
        guard node.pairs?.count == 1 else {
            sink.error("'\(path)' with 'github_actions' takes no other key", at: node.mark)
            return nil
        }
        let actionsPath = "\(path).github_actions"
        guard
            let keys = fields(
                actions.value, path: actionsPath, context: "'\(actionsPath)'", allowed: Self.githubActionsKeys)
        else { return nil }
        let audience = keys["audience"].flatMap { nonEmptyString($0.value, path: "\(actionsPath).audience")?.text }
        secretVariables.formUnion(["ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"])
        func variable(_ name: String) -> SecretSource {
            SecretSource(
                origin: .environment(name: name), file: file, mark: actions.value.mark, keyPath: actionsPath,
                resolver: resolver)
        }
        return .githubActions(
            audience: audience, requestURL: variable("ACTIONS_ID_TOKEN_REQUEST_URL"),
            requestToken: variable("ACTIONS_ID_TOKEN_REQUEST_TOKEN"))
    }

    /// `client_key`, `client_key_alg`, `client_key_id` and `client_assertion_audience` (SPEC §10);
    /// with mutual TLS, `client_key` is the certificate's key.
    private mutating func decodeClientKey(_ keys: Fields, path: String, clientAuth: ClientAuthMethod?)
        -> ClientKeySettings?
    {
        let related = ["client_key_alg", "client_key_id", "client_assertion_audience"]
        guard let pair = keys["client_key"] else {
            for name in related {
                if let stray = keys[name] {
                    sink.error("'\(path).\(name)' only applies with a 'client_key'", at: stray.key.mark)
                }
            }
            return nil
        }
        if let clientAuth, clientAuth.isMutualTLS {
            // The certificate's key: none of the assertion settings apply.
            for name in related {
                if let stray = keys[name] {
                    sink.error(
                        "'\(path).\(name)' applies to private_key_jwt, not \(clientAuth.rawValue)", at: stray.key.mark)
                }
            }
        } else if let clientAuth, clientAuth != .privateKeyJWT {
            sink.error(
                "'\(path).client_key' is used by 'client_auth: private_key_jwt', not \(clientAuth.rawValue)",
                at: pair.key.mark)
        } else if keys["client_secret"] != nil {
            sink.error(
                "'client_key' (private_key_jwt) and 'client_secret' are both set; a client authenticates one way",
                at: pair.key.mark)
        }
        guard let source = secretSource(pair.value, path: "\(path).client_key", format: .pemPrivateKey) else {
            return nil
        }
        var settings = ClientKeySettings(key: source)
        if let entry = keys["client_key_alg"] {
            settings.algorithm = choice(
                entry.value, path: "\(path).client_key_alg", choices: ["ES256", "RS256", "PS256"])
        }
        if let entry = keys["client_key_id"] {
            settings.keyID = nonEmptyString(entry.value, path: "\(path).client_key_id")?.text
        }
        if let entry = keys["client_assertion_audience"],
            let value = choice(
                entry.value, path: "\(path).client_assertion_audience",
                choices: ClientKeySettings.Audience.allCases.map(\.rawValue)),
            let audience = ClientKeySettings.Audience(rawValue: value)
        {
            // A discovered profile's issuer comes from the resource (SPEC §9.1).
            let discovers = keys["discover"]?.value.scalar?.value.lowercased() == "true"
            if audience == .issuer && keys["issuer"] == nil && !discovers {
                sink.error("'client_assertion_audience: issuer' needs an 'issuer'", at: entry.value.mark)
            }
            settings.audience = audience
        }
        return settings
    }

    /// A secret source: an inline string (warned about), `{ env: NAME }`, `{ file: path }` or
    /// `{ command: [argv], timeout: 10s }`. Never quotes the value in a message.
    mutating func secretSource(_ node: YAMLNode, path: String, format: SecretSource.Format = .any) -> SecretSource? {
        let expected = "a secret source: { env: NAME }, { file: path }, { command: [argv] } or a string"
        if node.scalar != nil, !node.isNull {
            // Interpolate without echoing anything: errors name only the path and variable.
            guard let value = self.scalar(node, path: path, expected: expected) else { return nil }
            if !value.interpolated {
                sink.warning(
                    "inline secret in '\(path)'; prefer { env: NAME }, { file: path } or { command: [argv] }",
                    at: node.mark)
            }
            let source = SecretSource(
                origin: .inline, inlineValue: value.text, file: file, mark: node.mark, keyPath: path, format: format,
                resolver: resolver)
            secrets.append(source)
            return source
        }
        guard node.pairs != nil else {
            sink.error("'\(path)' must be \(expected), found \(node.kindDescription)", at: node.mark)
            return nil
        }
        guard let keys = fields(node, path: path, context: "secret source '\(path)'", allowed: Self.secretSourceKeys)
        else { return nil }
        let kinds = ["env", "file", "command"].filter { keys[$0] != nil }
        guard kinds.count == 1, let kind = kinds.first, let pair = keys[kind] else {
            let problem =
                kinds.isEmpty
                ? "needs one of 'env', 'file' or 'command'"
                : "sets \(kinds.joined(separator: " and ")); use exactly one"
            sink.error("secret source '\(path)' \(problem)", at: node.mark)
            return nil
        }
        if let timeout = keys["timeout"], kind != "command" {
            sink.error("'timeout' only applies to a { command: [...] } secret source", at: timeout.key.mark)
        }
        let origin: SecretSource.Origin
        switch kind {
        case "env":
            guard let value = nonEmptyString(pair.value, path: "\(path).env"), !value.unresolved else { return nil }
            guard Interpolation.isValidName(value.text) else {
                sink.error(
                    "'\(path).env' \(value.quoted) is not a valid environment variable name", at: pair.value.mark)
                return nil
            }
            origin = .environment(name: value.text)
            secretVariables.insert(value.text)
        case "file":
            guard let file = filePath(pair.value, path: "\(path).file") else { return nil }
            checkSecretFile(file, mark: pair.value.mark, path: path)
            origin = .file(path: file)
        default:
            guard let argv = stringList(pair.value, path: "\(path).command"), pair.value.items != nil else {
                if pair.value.scalar != nil {
                    sink.error(
                        "'\(path).command' must be a list of arguments like [pass, show, api/key] (no shell is used)",
                        at: pair.value.mark)
                }
                return nil
            }
            guard !argv.isEmpty else {
                sink.error("'\(path).command' must name a program", at: pair.value.mark)
                return nil
            }
            let timeout = keys["timeout"].flatMap { duration($0.value, path: "\(path).timeout") } ?? .seconds(10)
            origin = .command(argv: argv, timeout: timeout)
        }
        let source = SecretSource(
            origin: origin, file: file, mark: node.mark, keyPath: path, format: format, resolver: resolver)
        secrets.append(source)
        return source
    }

    /// Warns about a secret file that is missing (it may appear before it is needed) or
    /// readable by group or others.
    private mutating func checkSecretFile(_ path: String, mark: SourceMark, path keyPath: String) {
        guard let permissions = resolver.fileSystem.permissions(atPath: path) else {
            if case .check(resolveSecrets: false) = mode {
                sink.warning("secret file \(path) for '\(keyPath)' does not exist", at: mark)
            } else if mode.isServe {
                sink.warning(
                    "secret file \(path) for '\(keyPath)' does not exist yet; requests that need it will fail", at: mark
                )
            }
            return
        }
        if permissions & 0o077 != 0 {
            let octal = String(permissions, radix: 8)
            sink.warning(
                "secret file \(path) is readable by group or others (mode 0\(octal)); run chmod 600 on it", at: mark)
        }
    }
}
