import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// The parts of RFC 8414 / OIDC discovery metadata the token manager uses, verified.
public struct AuthorizationServerMetadata: Sendable, Equatable {
    /// The issuer (equal to the configured one).
    public let issuer: String
    /// The token endpoint (an allowed endpoint URL).
    public let tokenEndpoint: String
    /// Supported client authentication methods, when the server lists them.
    public let tokenEndpointAuthMethodsSupported: [String]?
    /// The RFC 7009 revocation endpoint, if offered.
    public let revocationEndpoint: String?
    /// The authorization endpoint (RFC 6749 §3.1), if offered.
    public var authorizationEndpoint: String? = nil
    /// The RFC 8628 device authorization endpoint, if offered.
    public var deviceAuthorizationEndpoint: String? = nil
    /// The OpenID Connect JWKS document, if offered.
    public var jwksURI: String? = nil
    /// What RFC 9728/7591 discovery and registration read (SPEC §9), when the server gives them.
    public var registration = RegistrationSupport()
    /// The server says its authorization responses carry `iss` (RFC 9207 §3): a callback without
    /// it is then refused.
    public var authorizationResponseIssParameterSupported = false
    /// RFC 8705 §5: the endpoints mutual-TLS clients use instead (`token_endpoint`,
    /// `revocation_endpoint`, `device_authorization_endpoint`...), the allowed URLs among them;
    /// an alias that is not one is left out (a bearer client never uses them).
    public var mtlsEndpointAliases: [String: String] = [:]

    /// The endpoint named `name` (`token_endpoint`...) a client uses: its mutual-TLS alias when
    /// the client authenticates with a certificate and the server gave one, else `plain`.
    public func endpoint(_ name: String, plain: String?, mutualTLS: Bool) -> String? {
        if mutualTLS, let alias = mtlsEndpointAliases[name] { return alias }
        return plain
    }

    /// Verifies a discovery document: one JSON object whose `issuer` equals `expectedIssuer`
    /// exactly and whose endpoints are all allowed URLs.
    static func parse(_ body: [UInt8], expectedIssuer: String) throws(AuthError) -> AuthorizationServerMetadata {
        let object: JSONObject
        do {
            object = try TokenResponseParser.jsonObject(body)
        } catch {
            throw .discovery("the metadata is not one JSON object")
        }
        guard let issuer = object["issuer"]?.stringValue else { throw .discovery("the metadata has no issuer") }
        guard issuer == expectedIssuer else {
            // Both values, quoted: a trailing slash or a scheme is what usually differs. The
            // server's is cleaned before it goes into a message.
            throw .discovery(
                "the metadata's issuer '\(ServerText(issuer).value)' does not equal the configured issuer "
                    + "'\(expectedIssuer)' (they must match exactly, a trailing slash included)")
        }
        for (name, value) in object where name.hasSuffix("_endpoint") || name == "jwks_uri" {
            // The member name is the server's text: cleaned before it goes into a message.
            let shown = ServerText(name).value
            guard let url = value.stringValue else { throw .discovery("\(shown) is not a string") }
            do {
                try EndpointPolicy.check(url, what: shown)
            } catch {
                throw .discovery("\(shown) is not an https (or loopback http) URL")
            }
        }
        guard let tokenEndpoint = object["token_endpoint"]?.stringValue else {
            throw .discovery("the metadata has no token_endpoint")
        }
        var methods: [String]?
        if let value = object["token_endpoint_auth_methods_supported"] {
            guard let strings = value.stringArray else {
                throw .discovery("token_endpoint_auth_methods_supported is not a list of strings")
            }
            methods = strings
        }
        var metadata = AuthorizationServerMetadata(
            issuer: issuer, tokenEndpoint: tokenEndpoint, tokenEndpointAuthMethodsSupported: methods,
            revocationEndpoint: object["revocation_endpoint"]?.stringValue,
            authorizationEndpoint: object["authorization_endpoint"]?.stringValue,
            deviceAuthorizationEndpoint: object["device_authorization_endpoint"]?.stringValue,
            jwksURI: object["jwks_uri"]?.stringValue,
            authorizationResponseIssParameterSupported: object["authorization_response_iss_parameter_supported"]?
                .boolValue == true)
        metadata.registration = try RegistrationSupport(object)
        if case .object(let aliases)? = object["mtls_endpoint_aliases"] {
            for (name, value) in aliases where name.hasSuffix("_endpoint") {
                guard let url = value.stringValue, (try? EndpointPolicy.check(url, what: "mtls alias")) != nil else {
                    log.warn(
                        "the issuer's mtls_endpoint_aliases.\(ServerText(name).value) is not an allowed URL; not used")
                    continue
                }
                metadata.mtlsEndpointAliases[name] = url
            }
        }
        return metadata
    }

    /// The discovery URLs to try for `issuer`, in the MCP authorization spec's order: RFC 8414
    /// (well-known inserted before the issuer's path), OpenID Connect inserted the same way (only
    /// for an issuer with a path), then OpenID Connect appended to the issuer.
    static func discoveryURLs(for issuer: String) throws(AuthError) -> [String] {
        // libcurl's parse (the parser that sends them): the URLs keep the issuer's origin exactly.
        let parsed = try EndpointPolicy.check(issuer, what: "issuer")
        guard parsed.query == nil else { throw .configuration("issuer must not have a query or fragment") }
        var path = parsed.path
        while path.hasSuffix("/") { path.removeLast() }
        let inserted = parsed.root + "/.well-known/oauth-authorization-server" + path
        let appended = parsed.root + path + "/.well-known/openid-configuration"
        guard !path.isEmpty else { return [inserted, appended] }
        return [inserted, parsed.root + "/.well-known/openid-configuration" + path, appended]
    }
}
