import FoundationEssentials
import Synchronization
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// A bearer token fetched by a closure (e.g. a `command`) and cached for `cacheDuration`. Renewable:
/// a 401 `invalid_token` drops the cached value (if it is still the one that failed) so the next
/// request fetches it again — the command may well return a fresh token. Fetches are single-flight.
public final class FetchedBearerCredentialSource: CredentialSource, BearerTokenSource {
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

    /// Sets `Authorization: Bearer` from the cache or a (single-flight) fetch; the stamp names the fetched value.
    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let (value, version) = try await current()
        // In use: kept among the redactor's recent tokens (registered again if it was dropped).
        Redactor.shared.registerToken(value)
        request.headers.set(name: "Authorization", value: "Bearer \(value)")
        return CredentialStamp(version)
    }

    /// The bearer token itself, cached or fetched as for a request (credential-helper mode).
    public func bearerToken() async throws -> String? {
        try await current().0
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
            let task = Placement.throwingTask { try await fetcher.resolve() }
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
                case .failure(let error):
                    throw (error as? AuthError) ?? AuthError.configuration("the bearer token could not be fetched")
                }
            }
        }
    }
}
