import Foundation

/// Where tokens and metadata may be fetched from: HTTPS anywhere, plain HTTP only on loopback
/// (127.0.0.0/8, ::1, localhost); no user info, no fragment.
enum EndpointPolicy {
    /// Throws a configuration error unless `url` is an allowed endpoint.
    static func check(_ url: String, what: String) throws(AuthError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw .configuration("\(what) is not an absolute URL") }
        guard components.user == nil, components.password == nil else {
            throw .configuration("\(what) must not contain user information")
        }
        guard components.fragment == nil else { throw .configuration("\(what) must not contain a fragment") }
        switch scheme {
        case "https": return
        case "http":
            guard isLoopback(host) else {
                throw .configuration("\(what) must use https (plain http is allowed only on loopback)")
            }
        default: throw .configuration("\(what) must use https")
        }
    }

    /// Whether `host` names the loopback interface.
    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber)
                && (Int(part) ?? 256) <= 255
        }
    }
}
