import Foundation
import HTTP
import Logging
import Synchronization

/// Credentials that do not change: an API key (header or query), HTTP Basic, or a static bearer
/// token. The secret is resolved on first use and kept; `invalidate` does nothing and 401s are
/// not recovered (renewing would not change the secret).
public final class StaticCredentialSource: CredentialSource {
    /// Where an API key goes.
    public enum Placement: Sendable {
        /// In the named header.
        case header(String)
        /// As the named query parameter (percent-encoded, appended to the URL).
        case query(String)
    }

    /// The kind of credential.
    public enum Credential: Sendable {
        /// `api_key`.
        case apiKey(Placement, SecretProvider)
        /// `basic`: `Authorization: Basic base64(username:password)` (RFC 7617).
        case basic(username: String, password: SecretProvider)
        /// `bearer` with a static token: `Authorization: Bearer <token>`.
        case bearer(SecretProvider)
    }

    private let credential: Credential
    /// Guarded by the mutex: the resolved secret, once known.
    private let resolved = Mutex<String?>(nil)

    public init(_ credential: Credential) {
        self.credential = credential
    }

    /// Attaches the credential; always stamp 0.
    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        switch credential {
        case .apiKey(.header(let name), let provider):
            request.headers.set(name: name, value: try await secret(provider))
        case .apiKey(.query(let name), let provider):
            request.url = Self.appendingQuery(name: name, value: try await secret(provider), to: request.url)
        case .basic(let username, let provider):
            let encoded = Data("\(username):\(try await secret(provider))".utf8).base64EncodedString()
            Redactor.shared.register(encoded)
            request.headers.set(name: "Authorization", value: "Basic \(encoded)")
        case .bearer(let provider):
            request.headers.set(name: "Authorization", value: "Bearer \(try await secret(provider))")
        }
        return CredentialStamp(0)
    }

    /// Static secrets cannot be renewed.
    public var isRenewable: Bool { false }

    /// Nothing to drop.
    public func invalidate(stamp: CredentialStamp) async throws {}

    private func secret(_ provider: SecretProvider) async throws -> String {
        if let value = resolved.withLock({ $0 }) { return value }
        let value: String
        do {
            value = try await provider.resolve()
        } catch {
            throw AuthError.configuration("the credential's secret could not be resolved")
        }
        resolved.withLock { $0 = value }
        return value
    }

    /// `url` with `name=value` (both percent-encoded) added to its query, before any fragment.
    static func appendingQuery(name: String, value: String, to url: String) -> String {
        let pair = "\(FormBody.encode(name, spaceAsPlus: false))=\(FormBody.encode(value, spaceAsPlus: false))"
        Redactor.shared.register(FormBody.encode(value, spaceAsPlus: false))
        var base = url
        var fragment = ""
        if let hash = url.firstIndex(of: "#") {
            base = String(url[..<hash])
            fragment = String(url[hash...])
        }
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + pair + fragment
    }
}

/// A bearer token fetched by a closure (e.g. a `command`) and cached for `cacheDuration`. Renewable:
/// a 401 `invalid_token` drops the cached value (if it is still the one that failed) so the next
/// request fetches it again — the command may well return a fresh token. Fetches are single-flight.
public final class FetchedBearerCredentialSource: CredentialSource {
    private struct Cached {
        var value: String
        var fetchedAt: Date
        var version: UInt64
    }

    private struct State {
        var cached: Cached?
        var fetch: Task<String, any Error>?
        var fetchID: UInt64 = 0
        var lastVersion: UInt64 = 0
    }

    private let fetcher: SecretProvider
    private let cacheDuration: Duration?
    private let clock: any AuthClock
    /// Guarded by the mutex: the cached token and the fetch in progress.
    private let state = Mutex(State())

    /// `cacheDuration` nil: cache until invalidated.
    public init(fetcher: SecretProvider, cacheDuration: Duration?, clock: any AuthClock = SystemAuthClock()) {
        self.fetcher = fetcher
        self.cacheDuration = cacheDuration
        self.clock = clock
    }

    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let (value, version) = try await current()
        request.headers.set(name: "Authorization", value: "Bearer \(value)")
        return CredentialStamp(version)
    }

    /// A 401 may be recovered by fetching again.
    public var isRenewable: Bool { true }

    /// Drops the cached token if it is the one of `stamp`.
    public func invalidate(stamp: CredentialStamp) async throws {
        state.withLock { state in
            if state.cached?.version == stamp.value { state.cached = nil }
        }
    }

    /// Drops the cached token whatever its version (`token-invalidate`): the next request
    /// fetches it again.
    public func reset() {
        state.withLock { $0.cached = nil }
    }

    private func current() async throws -> (String, UInt64) {
        let now = clock.now
        let limit = cacheDuration?.timeInterval
        enum Decision {
            case cached(String, UInt64)
            case wait(Task<String, any Error>, UInt64)
        }
        let decision: Decision = state.withLock { state in
            if let cached = state.cached, limit.map({ now.timeIntervalSince(cached.fetchedAt) < $0 }) ?? true {
                return .cached(cached.value, cached.version)
            }
            if let fetch = state.fetch { return .wait(fetch, state.fetchID) }
            let fetcher = self.fetcher
            let task = Task { try await fetcher.resolve() }
            state.fetchID += 1
            state.fetch = task
            return .wait(task, state.fetchID)
        }
        switch decision {
        case .cached(let value, let version):
            return (value, version)
        case .wait(let task, let fetchID):
            let result = await task.result
            return try state.withLock { state in
                if state.fetchID == fetchID, state.fetch != nil {
                    state.fetch = nil
                    if case .success(let value) = result {
                        state.lastVersion += 1
                        state.cached = Cached(value: value, fetchedAt: clock.now, version: state.lastVersion)
                    }
                }
                switch result {
                case .success(let value):
                    return (value, state.cached?.value == value ? state.cached?.version ?? 0 : 0)
                case .failure:
                    throw AuthError.configuration("the bearer token could not be fetched")
                }
            }
        }
    }
}
