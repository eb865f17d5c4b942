import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// The parts of RFC 9728 protected resource metadata tokenrelay uses, verified (SPEC §9.1).
public struct ProtectedResourceMetadata: Sendable, Equatable {
    /// The resource identifier (equal to the expected canonical resource URI).
    public let resource: String
    /// The authorization servers' issuer identifiers, in the document's order (at least one).
    public let authorizationServers: [String]
    /// The scopes the resource names, if any.
    public let scopesSupported: [String]?

    /// Verifies a document: one JSON object whose `resource` is the identifier its URL was built
    /// from (SPEC §9.1): `expectedResource`, or with `prefixAllowed` (the root well-known document)
    /// an origin or path prefix of it at a segment boundary, as the MCP SDKs accept (both in
    /// canonical form, SPEC §9.3); and whose `authorization_servers` are https (or loopback http)
    /// issuer identifiers. The document's `resource` is what RFC 8707 then sends.
    static func parse(_ body: [UInt8], expectedResource: String, prefixAllowed: Bool = false) throws(AuthError)
        -> ProtectedResourceMetadata
    {
        let object: JSONObject
        do {
            object = try TokenResponseParser.jsonObject(body)
        } catch {
            throw .discovery("the protected resource metadata is not one JSON object")
        }
        guard let resource = object["resource"]?.stringValue else {
            throw .discovery("the protected resource metadata has no resource")
        }
        guard let canonical = ResourceIdentifier.canonical(resource),
            canonical == expectedResource
                || (prefixAllowed && ResourceIdentifier.isPrefix(canonical, of: expectedResource))
        else {
            throw .discovery("the protected resource metadata names another resource than the one requested")
        }
        guard let servers = object["authorization_servers"]?.stringArray, !servers.isEmpty else {
            throw .discovery("the protected resource metadata names no authorization_servers")
        }
        for server in servers {
            do {
                try EndpointPolicy.precheck(server, what: "authorization server")
            } catch {
                throw .discovery("an authorization server is not an https (or loopback http) URL")
            }
        }
        var scopes: [String]?
        if let value = object["scopes_supported"] {
            guard let strings = value.stringArray else {
                throw .discovery("scopes_supported is not a list of strings")
            }
            scopes = strings
        }
        return ProtectedResourceMetadata(resource: canonical, authorizationServers: servers, scopesSupported: scopes)
    }

    /// The well-known URLs of the metadata of `resource` (RFC 9728 §3.1), in the MCP
    /// authorization spec's order: the path-aware one (well-known inserted before the path), then
    /// the root's.
    static func wellKnownURLs(for resource: String) throws(AuthError) -> [String] {
        let parsed = try EndpointPolicy.check(resource, what: "resource")
        var path = parsed.path
        while path.hasSuffix("/") { path.removeLast() }
        let root = try rootURL(for: resource)
        return path.isEmpty ? [root] : [root + path, root]
    }

    /// The root well-known URL of the origin of `resource`: its document may name the origin or
    /// a path prefix of the resource.
    static func rootURL(for resource: String) throws(AuthError) -> String {
        try EndpointPolicy.check(resource, what: "resource").root + "/.well-known/oauth-protected-resource"
    }
}

/// RFC 8707 resource identifiers (SPEC §9.3).
public enum ResourceIdentifier {
    /// The canonical form of `url`: scheme and host lower-case, no fragment, no trailing slash
    /// (the path and query kept as written). `nil` when it is not an absolute http(s) URL.
    public static func canonical(_ url: String) -> String? {
        var text = Substring(url)
        if let hash = text.firstIndex(of: "#") { text = text[..<hash] }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        var tail = String(rest[authorityEnd...])
        if !tail.contains("?") {
            while tail.hasSuffix("/") { tail.removeLast() }
        }
        return scheme + "://" + authority.lowercased() + tail
    }

    /// Whether canonical `prefix` is `resource` or an origin or path prefix of it ending at a
    /// segment boundary (`https://h/a` of `https://h/a/b`, never of `https://h/ab`); a prefix
    /// with a query is none.
    public static func isPrefix(_ prefix: String, of resource: String) -> Bool {
        guard !prefix.contains("?"), resource.hasPrefix(prefix) else { return false }
        let rest = resource.dropFirst(prefix.count)
        return rest.isEmpty || rest.first == "/" || rest.first == "?"
    }
}
