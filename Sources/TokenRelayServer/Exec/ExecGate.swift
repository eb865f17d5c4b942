import FoundationEssentials
import TokenRelayHTTP
import TokenRelayHTTPFields

/// What `tokenrelay exec`'s endpoint checks of a request before anything is forwarded, and what
/// of its fields goes on (SPEC §12). Pure.
struct ExecGate: Sendable {
    /// The child's placeholder (256 random bits, base64url).
    let placeholder: String
    /// The `Host` values that name the endpoint (lower-cased); `nil`: any (a Unix socket, which a
    /// browser cannot reach, so no rebinding can).
    let hosts: Set<String>?

    /// Whether `headers` carry a `Host` naming the endpoint (a DNS-rebinding page sends its own).
    func hostAllowed(_ headers: HTTPHeaders) -> Bool {
        guard let hosts else { return true }
        guard let host = headers["host"] else { return false }
        return hosts.contains(host.lowercased())
    }

    /// Whether `headers` present the placeholder: `Authorization: Bearer P`, `token P`, `Basic`
    /// with P as the password, or P as the whole value of the profile's own credential header.
    func presentsPlaceholder(_ headers: HTTPHeaders, credentialHeader: String?) -> Bool {
        if let credentialHeader, !credentialHeader.caseInsensitiveEquals("authorization"),
            headers.values(for: credentialHeader).contains(where: { Self.same($0, placeholder) })
        {
            return true
        }
        for value in headers.values(for: "authorization") {
            let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2 else {
                // The profile's own header may be Authorization itself with the value bare.
                if credentialHeader?.caseInsensitiveEquals("authorization") == true, Self.same(value, placeholder) {
                    return true
                }
                continue
            }
            let scheme = parts[0].lowercased()
            let credential = HTTPFieldRules.trimmingWhitespace(parts[1])
            switch scheme {
            case "bearer", "token":
                if Self.same(credential, placeholder) { return true }
            case "basic":
                guard let decoded = Data(base64Encoded: credential), let colon = decoded.firstIndex(of: 0x3A) else {
                    continue
                }
                let password = String(decoding: decoded[decoded.index(after: colon)...], as: UTF8.self)
                if Self.same(password, placeholder) { return true }
            default:
                continue
            }
        }
        return false
    }

    /// Compares without stopping at the first difference (the placeholder is a credential).
    static func same(_ lhs: String, _ rhs: String) -> Bool {
        let a = Array(lhs.utf8)
        let b = Array(rhs.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// Fields the endpoint never forwards: hop-by-hop ones (RFC 9110 §7.6.1) and what the transport
    /// frames itself, what carries a credential (the child's placeholder; the profile's own is set
    /// by the credentials middleware), and `Expect` (the endpoint answered it).
    static let droppedRequestFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host",
        "content-length", "expect", "authorization", "proxy-authorization", "cookie", "dpop",
    ]

    /// The child's fields as forwarded: without ``droppedRequestFields``, the fields its
    /// `Connection` names, any `Proxy-*` and the profile's credential header.
    static func forwardedFields(_ headers: HTTPHeaders, credentialHeader: String?) -> HTTPHeaders {
        let named = Set(
            headers.values(for: "connection").flatMap { $0.split(separator: ",") }.map {
                HTTPFieldRules.trimmingWhitespace($0).lowercased()
            })
        let credential = credentialHeader?.lowercased()
        return HTTPHeaders(
            headers.fields.filter { field in
                let name = field.name.lowercased()
                return !droppedRequestFields.contains(name) && !named.contains(name) && name != credential
                    && !HTTPFieldRules.isReserved(name)
            })
    }

    /// Response fields the endpoint sets itself or that belong to the upstream connection.
    static let droppedResponseFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length",
    ]

    /// The upstream's fields as handed to the child (framing is the endpoint's own).
    static func returnedFields(_ headers: HTTPHeaders) -> HTTPHeaders {
        HTTPHeaders(headers.fields.filter { !droppedResponseFields.contains($0.name.lowercased()) })
    }
}
