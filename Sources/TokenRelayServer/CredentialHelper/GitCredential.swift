import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC

/// One message of the git credential protocol (git-credential(1)): `key=value` lines up to a
/// blank line or the end of input. Keys ending in `[]` (`wwwauth[]`, `capability[]`) may repeat;
/// unknown keys are kept and ignored.
public struct GitCredentialRequest: Sendable, Equatable {
    /// The attributes in input order.
    public private(set) var attributes: [(key: String, value: String)] = []

    /// The largest message read (git sends a few hundred bytes).
    public static let maximumBytes = 64 << 10

    /// Parses `input`; a line without `=` or a message over ``maximumBytes`` is an error.
    public static func parse(_ input: some Collection<UInt8>) throws(RPCError) -> GitCredentialRequest {
        guard input.count <= maximumBytes else {
            throw RPCError(code: .invalidParams, message: "the git credential input is over \(maximumBytes) bytes")
        }
        var request = GitCredentialRequest()
        // Split on bytes: as Characters, "\r\n" is one grapheme and would not split at "\n".
        for rawLine in Array(input).split(separator: 0x0A, omittingEmptySubsequences: false) {
            let bytes = rawLine.last == 0x0D ? rawLine.dropLast() : rawLine
            if bytes.isEmpty { break }
            let line = String(decoding: bytes, as: UTF8.self)
            guard let equals = line.firstIndex(of: "=") else {
                throw RPCError(
                    code: .invalidParams, message: "invalid git credential line (no '='): '\(line.prefix(60))'")
            }
            request.attributes.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
        }
        return request
    }

    /// The last value of `key` (git: a later line replaces an earlier one).
    public subscript(key: String) -> String? { attributes.last { $0.key == key }?.value }

    public static func == (lhs: GitCredentialRequest, rhs: GitCredentialRequest) -> Bool {
        lhs.attributes.elementsEqual(rhs.attributes) { $0.key == $1.key && $0.value == $1.value }
    }
}

/// How git's credential fields are matched against an environment's `base_url`, and what a
/// helper answers. Pure.
public enum GitCredentialMatch: Sendable, Equatable {
    /// It matches; `specificity` is the length of the base URL's path (the longest wins).
    case matches(specificity: Int)
    /// The origin matches but the base URL has a path and git sent none
    /// (`credential.useHttpPath` is off): no answer, and a hint.
    case pathRequired
    /// It does not match.
    case none

    /// Matches `request` against `baseURL`: `protocol` and `host` (with its port) must name the
    /// base URL's origin, and when the base URL has a path, git's `path` must lie at or below
    /// it, segment by segment. Both sides are parsed by libcurl (``ParsedURL``, the parser that
    /// sends requests), so they cannot disagree about what a URL names.
    public static func match(_ request: GitCredentialRequest, baseURL: String) -> GitCredentialMatch {
        guard let scheme = request["protocol"], let host = request["host"], !host.isEmpty,
            !host.contains(where: { "/?#@\\ ".contains($0) }), let base = try? ParsedURL(baseURL)
        else { return .none }
        let path = request["path"]
        // A `?` or `#` in git's (decoded) path would end the path and shorten it to a prefix.
        if let path, path.contains(where: { "?#".contains($0) }) { return .none }
        guard let requested = try? ParsedURL("\(scheme)://\(host)/\(path ?? "")"), requested.origin == base.origin
        else { return .none }
        let basePath = trimmedPath(base.path)
        guard !basePath.isEmpty else { return .matches(specificity: 0) }
        guard path != nil else { return .pathRequired }
        let requestedPath = trimmedPath(requested.path)
        guard requestedPath == basePath || requestedPath.hasPrefix(basePath + "/") else { return .none }
        return .matches(specificity: basePath.count)
    }

    private static func trimmedPath(_ path: String) -> String {
        var path = Substring(path)
        while path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }

    /// The answer to `get`: `username`, `password` and (when the expiry is known)
    /// `password_expiry_utc` in Unix seconds. `nil` when a value would break a line.
    public static func answer(username: String, password: String, expiresAt: Date?) -> String? {
        let unsafe: (String) -> Bool = { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }
        guard !unsafe(username), !unsafe(password) else { return nil }
        var text = "username=\(username)\npassword=\(password)\n"
        if let expiresAt {
            text += "password_expiry_utc=\(Int(expiresAt.timeIntervalSince1970.rounded(.down)))\n"
        }
        return text
    }
}
