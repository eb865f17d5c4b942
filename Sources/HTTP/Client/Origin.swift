/// A web origin: scheme, host and port (RFC 6454), compared exactly. The host is lower-cased,
/// the port defaults to 80 for `http` and 443 for `https`.
public struct Origin: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`, lower case.
    public let scheme: String
    /// The host, lower case; an IPv6 literal keeps its brackets.
    public let host: String
    public let port: Int

    public init(scheme: String, host: String, port: Int) {
        self.scheme = scheme.lowercased()
        self.host = host.lowercased()
        self.port = port
    }

    /// Parses the origin of an absolute `http`/`https` URL; `nil` for anything else.
    public init?(url: String) {
        let bytes = Array(url.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
            bytes.count >= colon + 3, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else { return nil }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let defaultPort: Int
        switch scheme {
        case "http": defaultPort = 80
        case "https": defaultPort = 443
        default: return nil
        }
        let authorityStart = colon + 3
        var authorityEnd = authorityStart
        while authorityEnd < bytes.count, !"/?#".utf8.contains(bytes[authorityEnd]) { authorityEnd += 1 }
        var hostStart = authorityStart
        if let at = bytes[authorityStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) { hostStart = at + 1 }
        var hostEnd = authorityEnd
        var portText: ArraySlice<UInt8> = []
        if hostStart < authorityEnd, bytes[hostStart] == UInt8(ascii: "[") {
            guard let close = bytes[hostStart..<authorityEnd].firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostEnd = close + 1
            if hostEnd < authorityEnd {
                guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
                portText = bytes[(hostEnd + 1)..<authorityEnd]
            }
        } else if let portColon = bytes[hostStart..<authorityEnd].lastIndex(of: UInt8(ascii: ":")) {
            hostEnd = portColon
            portText = bytes[(portColon + 1)..<authorityEnd]
        }
        guard hostEnd > hostStart else { return nil }
        var port = defaultPort
        if !portText.isEmpty {
            guard portText.count <= 5, portText.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let parsed = Int(String(decoding: portText, as: UTF8.self)), parsed <= 65535
            else { return nil }
            port = parsed
        }
        self.init(scheme: scheme, host: String(decoding: bytes[hostStart..<hostEnd], as: UTF8.self), port: port)
    }

    /// `scheme://host:port`.
    public var description: String { "\(scheme)://\(host):\(port)" }
}

/// The origins that may receive an environment's headers and credentials: its own origin and
/// its `allowed_origins`.
public struct OriginPolicy: Sendable, Hashable {
    /// Every allowed origin.
    public let origins: Set<Origin>

    public init(_ origins: some Sequence<Origin>) {
        self.origins = Set(origins)
    }

    /// The policy of an environment with base URL `baseURL` and extra `allowed` origin URLs
    /// (strings that do not parse are ignored; configuration validates them).
    public init(baseURL: String, allowed: [String] = []) {
        self.init(([baseURL] + allowed).compactMap(Origin.init(url:)))
    }

    /// Whether a request to `url` may carry the environment's headers and credentials.
    public func allows(url: String) -> Bool {
        guard let origin = Origin(url: url) else { return false }
        return origins.contains(origin)
    }
}
