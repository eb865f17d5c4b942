import Synchronization
import TokenRelayLogging

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

    /// The origin of an absolute `http`/`https` URL as libcurl parses it (``ParsedURL``, the
    /// parser that sends the request); `nil` for anything it refuses.
    public init?(url: String) {
        guard let parsed = try? ParsedURL(url) else { return nil }
        self = parsed.origin
    }

    /// `scheme://host:port`.
    public var description: String { "\(scheme)://\(host):\(port)" }
}

/// The origins that may receive an environment's headers and credentials: its own origin and
/// its `allowed_origins`, computed by libcurl's URL parser (the one that sends requests) once,
/// on first use, so that starting the process does not load libcurl.
public struct OriginPolicy: Sendable {
    /// The configured URLs the origins come from (base URL first).
    public let configured: [String]
    private let resolved: ResolvedOrigins

    /// A policy of exactly `origins`.
    public init(_ origins: some Sequence<Origin>) {
        configured = []
        resolved = ResolvedOrigins(origins: Set(origins))
    }

    /// The policy of an environment with base URL `baseURL` and extra `allowed` origin URLs.
    /// A configured URL libcurl refuses contributes no origin (configuration validates them; the
    /// refusal is logged once).
    public init(baseURL: String, allowed: [String] = []) {
        configured = [baseURL] + allowed
        resolved = ResolvedOrigins(configured: configured)
    }

    /// Every allowed origin.
    public var origins: Set<Origin> { resolved.origins }

    /// Whether `request` may carry the environment's headers and credentials: its URL parses
    /// (libcurl; the parse the request carries, while it still describes its URL) and its origin
    /// is one of ``origins``.
    public func allows(_ request: HTTPRequest) -> Bool {
        guard let parsed = try? request.targetURL() else { return false }
        return allows(parsed)
    }

    /// Whether a request to `url` may carry the environment's headers and credentials.
    public func allows(_ url: ParsedURL) -> Bool {
        origins.contains(url.origin)
    }

    /// Why ``allows(_:)`` refuses `request`, for a log line: "origin http://localhost:8080 is not
    /// the environment's origin http://127.0.0.1:8080; add it to allowed_origins". Names origins
    /// only (scheme, host, port), never a path, query or user info.
    public func refusal(for request: HTTPRequest) -> String {
        guard let parsed = try? request.targetURL() else { return "the request's URL does not parse" }
        let own = configured.first.flatMap { try? ParsedURL($0).origin }
        var text = "origin \(parsed.origin) is not the environment's origin \(own?.description ?? "(none)")"
        let others = origins.subtracting(own.map { [$0] } ?? []).map(\.description).sorted()
        if !others.isEmpty { text += " nor one of its allowed_origins (\(others.joined(separator: ", ")))" }
        return text + "; add it to allowed_origins to send the environment's credentials and headers there"
    }
}

/// The origins of an ``OriginPolicy``, computed once.
private final class ResolvedOrigins: Sendable {
    private let configured: [String]
    /// Guarded by the mutex: the origins, once computed.
    private let state: Mutex<Set<Origin>?>

    init(origins: Set<Origin>) {
        configured = []
        state = Mutex(origins)
    }

    init(configured: [String]) {
        self.configured = configured
        state = Mutex(nil)
    }

    var origins: Set<Origin> {
        if let known = state.withLock({ $0 }) { return known }
        var origins = Set<Origin>()
        for url in configured {
            do {
                origins.insert(try ParsedURL(url).origin)
            } catch {
                Logger.shared.warn("a configured origin is not usable and is ignored", [("reason", "\(error)")])
            }
        }
        return state.withLock { state in
            if let known = state { return known }
            state = origins
            return origins
        }
    }
}
