import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// What an authorization server's metadata says about discovery-driven clients (SPEC §9).
public struct RegistrationSupport: Sendable, Equatable {
    /// The RFC 7591 registration endpoint, if offered.
    public var registrationEndpoint: String?
    /// The scopes the server lists, if any.
    public var scopesSupported: [String]?
    /// The PKCE methods the server lists (`nil`: the metadata does not say).
    public var codeChallengeMethodsSupported: [String]?
    /// Whether the server accepts Client ID Metadata Documents as client ids.
    public var clientIDMetadataDocumentSupported = false

    /// Nothing offered.
    public init() {}

    /// Reads the members of a metadata document (already checked for allowed endpoint URLs).
    init(_ object: JSONObject) throws(AuthError) {
        registrationEndpoint = object["registration_endpoint"]?.stringValue
        func strings(_ name: String) throws(AuthError) -> [String]? {
            guard let value = object[name] else { return nil }
            guard let list = value.stringArray else { throw .discovery("\(name) is not a list of strings") }
            return list
        }
        scopesSupported = try strings("scopes_supported")
        codeChallengeMethodsSupported = try strings("code_challenge_methods_supported")
        clientIDMetadataDocumentSupported = object["client_id_metadata_document_supported"]?.boolValue ?? false
    }
}

/// A client registration kept in the store per issuer (SPEC §9.4): sealed like a refresh token
/// (its secret, when the server issued one, is a credential). Its description shows no secret.
public struct ClientRegistration: Sendable, Equatable, CustomStringConvertible {
    /// The issuer the client is registered with.
    public var issuer: String
    /// The client identifier (or the Client ID Metadata Document's URL).
    public var clientID: String
    /// The client secret, when the server issued one.
    public var clientSecret: String?
    /// When the secret (and so the registration) expires (`nil`: never).
    public var expiresAt: Date?
    /// The redirect URIs registered.
    public var redirectURIs: [String]
    /// How the client authenticates at the token endpoint.
    public var tokenEndpointAuthMethod: String
    /// The scopes the client was registered for (`nil`: the server did not limit them).
    public var scopes: [String]?

    /// Creates a record.
    public init(
        issuer: String, clientID: String, clientSecret: String? = nil, expiresAt: Date? = nil,
        redirectURIs: [String], tokenEndpointAuthMethod: String = "none", scopes: [String]? = nil
    ) {
        self.scopes = scopes
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.expiresAt = expiresAt
        self.redirectURIs = redirectURIs
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
    }

    /// Whether the registration can still be used at `now` (a minute of margin before expiry) for
    /// `wanted` redirect URIs and `scopes` (a step-up beyond the registered scopes registers again).
    public func isUsable(at now: Date, redirectURIs wanted: [String], scopes wantedScopes: [String] = []) -> Bool {
        if let expiresAt, expiresAt.timeIntervalSince(now) < 60 { return false }
        if let scopes, !Set(wantedScopes).isSubset(of: Set(scopes)) { return false }
        return Set(wanted).isSubset(of: Set(redirectURIs))
    }

    /// How the client authenticates at the token endpoint: the registered method when tokenrelay
    /// can use it (a secret-based one only with a secret); else `none`, the secret kept, not sent.
    public var clientAuthMethod: ClientAuthMethod {
        switch ClientAuthMethod(rawValue: tokenEndpointAuthMethod) {
        case .clientSecretBasic?: clientSecret == nil ? .none : .clientSecretBasic
        case .clientSecretPost?: clientSecret == nil ? .none : .clientSecretPost
        default: .none
        }
    }

    /// Redacted.
    public var description: String {
        "ClientRegistration(issuer: \(issuer), secret: \(clientSecret == nil ? "none" : "[REDACTED]"))"
    }

    /// The record as stored (JSON; sealed by the store).
    var json: [UInt8] {
        var members: [(key: String, value: JSONValue)] = [
            ("issuer", .string(issuer)), ("clientID", .string(clientID)),
        ]
        if let clientSecret { members.append(("clientSecret", .string(clientSecret))) }
        if let expiresAt { members.append(("expiresAt", .number(JSONNumber(expiresAt.timeIntervalSince1970)))) }
        members.append(("redirectURIs", .array(redirectURIs.map { .string($0) })))
        members.append(("tokenEndpointAuthMethod", .string(tokenEndpointAuthMethod)))
        if let scopes { members.append(("scopes", .array(scopes.map { .string($0) }))) }
        return JSONValue.object(JSONObject(members)).serialized()
    }

    /// A stored record; `nil` when it is not one.
    init?(json: [UInt8]) {
        guard let value = try? JSONParser.parse(json), let object = value.objectValue,
            let issuer = object["issuer"]?.stringValue, let clientID = object["clientID"]?.stringValue,
            let redirects = object["redirectURIs"]?.stringArray,
            let method = object["tokenEndpointAuthMethod"]?.stringValue
        else { return nil }
        let expiry = object["expiresAt"]?.numberValue.flatMap { Double($0.literal) }
        self.init(
            issuer: issuer, clientID: clientID, clientSecret: object["clientSecret"]?.stringValue,
            expiresAt: expiry.map { Date(timeIntervalSince1970: $0) }, redirectURIs: redirects,
            tokenEndpointAuthMethod: method, scopes: object["scopes"]?.stringArray)
    }
}

/// RFC 7591 Dynamic Client Registration of a native public client (SPEC §9.4).
enum DynamicClientRegistration {
    /// The registration request's JSON body.
    static func requestBody(redirectURIs: [String], authMethod: String, scopes: [String]) -> [UInt8] {
        var members: [(key: String, value: JSONValue)] = [
            ("client_name", .string("tokenrelay")), ("application_type", .string("native")),
            ("redirect_uris", .array(redirectURIs.map { .string($0) })),
            ("grant_types", .array([.string("authorization_code"), .string("refresh_token")])),
            ("response_types", .array([.string("code")])),
            ("token_endpoint_auth_method", .string(authMethod)),
        ]
        if !scopes.isEmpty { members.append(("scope", .string(scopes.joined(separator: " ")))) }
        return JSONValue.object(JSONObject(members)).serialized()
    }

    /// The method to ask for: `none` unless the server lists methods without it (then the first
    /// secret-based one it lists).
    static func authMethod(supported: [String]?) -> String {
        guard let supported, !supported.contains("none") else { return "none" }
        return supported.first { $0 == "client_secret_basic" || $0 == "client_secret_post" } ?? "none"
    }

    /// The method of a registration answer (SPEC §9.4): the one it names; for a secret without
    /// one, the first of `client_secret_basic` and `client_secret_post` the server lists (in that
    /// order), else `none` (the secret is kept, not sent); without a secret, `none`.
    static func answeredMethod(named: String?, issuedSecret: Bool, supported: [String]?) -> String {
        if let named { return named }
        guard issuedSecret, let supported else { return "none" }
        return ["client_secret_basic", "client_secret_post"].first { supported.contains($0) } ?? "none"
    }

    /// Registers at `endpoint`; the answer must be a 201 (or 200) JSON object with a `client_id`.
    /// The answer is authoritative: its client id, its secret and its method (``answeredMethod``;
    /// `supported`: the server's `token_endpoint_auth_methods_supported`).
    static func register(
        endpoint: String, issuer: String, redirectURIs: [String], authMethod: String, supported: [String]?,
        scopes: [String], transport: any HTTPTransport, timeout: Duration
    ) async throws -> ClientRegistration {
        let parsed = try EndpointPolicy.check(endpoint, what: "registration_endpoint")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Accept", value: "application/json")
        let request = HTTPRequest(
            method: "POST", parsedURL: parsed, headers: headers,
            body: requestBody(redirectURIs: redirectURIs, authMethod: authMethod, scopes: scopes), timeout: timeout)
        let response = try await AuthorizationServerCall.send(request, to: "registration endpoint", over: transport)
        guard response.status == 201 || response.status == 200 else {
            if let object = try? TokenResponseParser.jsonObject(response.body),
                let error = object["error"]?.stringValue
            {
                throw AuthError.oauth(
                    error: ServerText(error),
                    description: object["error_description"]?.stringValue.map { ServerText($0) },
                    status: response.status)
            }
            throw AuthError.discovery("the client registration was refused (HTTP \(response.status))")
        }
        let object: JSONObject
        do {
            object = try TokenResponseParser.jsonObject(response.body)
        } catch {
            throw AuthError.discovery("the client registration answer is not one JSON object")
        }
        guard let clientID = object["client_id"]?.stringValue, !clientID.isEmpty else {
            throw AuthError.discovery("the client registration answer has no client_id")
        }
        let secret = object["client_secret"]?.stringValue
        if let secret { Redactor.shared.register(secret) }
        var expiresAt: Date?
        if let expiry = object["client_secret_expires_at"]?.numberValue.flatMap({ Double($0.literal) }), expiry > 0 {
            expiresAt = Date(timeIntervalSince1970: expiry)
        }
        let method = answeredMethod(
            named: object["token_endpoint_auth_method"]?.stringValue, issuedSecret: secret != nil, supported: supported)
        return ClientRegistration(
            issuer: issuer, clientID: clientID, clientSecret: secret, expiresAt: expiresAt,
            redirectURIs: object["redirect_uris"]?.stringArray ?? redirectURIs, tokenEndpointAuthMethod: method,
            scopes: object["scope"]?.stringValue.map { $0.split(separator: " ").map(String.init) }
                ?? (scopes.isEmpty ? nil : scopes))
    }
}
