import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// Fetches and caches verified metadata per issuer (single-flight, with a time to live).
public actor DiscoveryClient {
    private enum LegacyIssuer {
        case document(url: String)
        case defaults(AuthorizationServerMetadata)
    }

    private struct Entry {
        var metadata: AuthorizationServerMetadata
        var fetchedAt: Date
        /// How long the server let it be kept (`Cache-Control`), within ``timeToLive``.
        var lifetime: TimeInterval
    }

    private let transport: any HTTPTransport
    private let clock: any AuthClock
    private let timeToLive: TimeInterval
    private let random: @Sendable () -> Double
    private let retryPolicy: RetryPolicy
    /// Where a fetch runs (`nil`: the global concurrent executor).
    private let taskExecutor: (any TaskExecutor)?
    /// Verified metadata by issuer.
    private var cache: [String: Entry] = [:]
    /// Issuers met at an older server's origin (SPEC §9.7): their metadata is fetched again where
    /// it was found, or they are the default endpoints (nothing to fetch).
    private var legacy: [String: LegacyIssuer] = [:]
    /// Fetches in progress by issuer; callers share them.
    private var inFlight: [String: Task<(AuthorizationServerMetadata, TimeInterval), any Error>] = [:]

    /// Creates a client caching metadata for `timeToLive`; transient failures (connection
    /// failures, 408, 429, 5xx) are retried with `retryPolicy`'s bounded backoff (SPEC §7). A
    /// fetch runs on `taskExecutor` (the token manager's, ``Placement``).
    init(
        transport: any HTTPTransport, clock: any AuthClock = SystemAuthClock(), timeToLive: Duration = .seconds(3600),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        retryPolicy: RetryPolicy = RetryPolicy(), taskExecutor: (any TaskExecutor)?
    ) {
        self.taskExecutor = taskExecutor
        self.transport = transport
        self.clock = clock
        self.timeToLive = timeToLive.timeInterval
        self.random = random
        self.retryPolicy = retryPolicy
    }

    /// Verified metadata for `issuer`, from the cache or the network. Nothing is cached on failure.
    public func metadata(for issuer: String, deadline: Date) async throws -> AuthorizationServerMetadata {
        if let entry = cache[issuer], clock.now.timeIntervalSince(entry.fetchedAt) < min(timeToLive, entry.lifetime) {
            return entry.metadata
        }
        if let task = inFlight[issuer] { return try await task.value.0 }
        let urls: [String]
        switch legacy[issuer] {
        case .defaults(let metadata)?: return metadata
        case .document(let url)?: urls = [url]
        case nil: urls = try AuthorizationServerMetadata.discoveryURLs(for: issuer)
        }
        let task = Placement.throwingTask(.executor(taskExecutor)) { [transport, clock, random, retryPolicy] in
            try await Self.fetch(
                issuer: issuer, urls: urls, transport: transport, clock: clock, deadline: deadline, random: random,
                retryPolicy: retryPolicy)
        }
        inFlight[issuer] = task
        defer { inFlight[issuer] = nil }
        let (metadata, lifetime) = try await task.value
        cache[issuer] = Entry(metadata: metadata, fetchedAt: clock.now, lifetime: lifetime)
        return metadata
    }

    /// The authorization server of an MCP 2025-03-26 server that publishes no protected resource
    /// metadata (SPEC §9.7): the RFC 8414 metadata at its `origin`, taken with the issuer it names
    /// (that revision did not tie it to the origin; that issuer is then the one every later check
    /// uses, and its metadata is fetched again there); when the origin has none, the default
    /// endpoints `/authorize`, `/token` and `/register` there, with the origin as the issuer.
    public func legacyMetadata(origin: String, deadline: Date) async throws -> AuthorizationServerMetadata {
        let url = origin + "/.well-known/oauth-authorization-server"
        guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        let request = HTTPRequest(
            method: "GET", parsedURL: try EndpointPolicy.check(url, what: "the origin's metadata"), headers: headers,
            timeout: timeout)
        let response = try await AuthorizationServerCall.send(request, to: "the origin's metadata", over: transport)
        switch response.status {
        case 200:
            guard let named = (try? TokenResponseParser.jsonObject(response.body))?["issuer"]?.stringValue else {
                throw AuthError.discovery("the origin's metadata has no issuer")
            }
            let metadata = try AuthorizationServerMetadata.parse(response.body, expectedIssuer: named)
            legacy[named] = .document(url: url)
            cache[named] = Entry(
                metadata: metadata, fetchedAt: clock.now,
                lifetime: ResourceAuthorization.lifetime(cacheControl: response.headers["Cache-Control"]))
            return metadata
        case 404:
            var metadata = AuthorizationServerMetadata(
                issuer: origin, tokenEndpoint: origin + "/token", tokenEndpointAuthMethodsSupported: nil,
                revocationEndpoint: nil, authorizationEndpoint: origin + "/authorize")
            metadata.registration.registrationEndpoint = origin + "/register"
            // PKCE is required by that revision as by this one.
            metadata.registration.codeChallengeMethodsSupported = ["S256"]
            legacy[origin] = .defaults(metadata)
            return metadata
        default:
            throw AuthError.discovery("the origin's metadata could not be fetched (HTTP \(response.status))")
        }
    }

    /// Forgets cached metadata (all issuers).
    public func clear() { cache.removeAll() }

    /// What one pass over the discovery URLs gave.
    private enum Pass {
        /// Verified metadata, and how long its `Cache-Control` lets it be kept.
        case found(AuthorizationServerMetadata, lifetime: TimeInterval)
        /// No URL gave metadata; `transient` when a failure may go away on retry.
        case failed(AuthError, transient: Bool, retryAfter: Duration?)
    }

    private static func fetch(
        issuer: String, urls: [String], transport: any HTTPTransport, clock: any AuthClock, deadline: Date,
        random: @Sendable () -> Double, retryPolicy: RetryPolicy
    ) async throws -> (AuthorizationServerMetadata, TimeInterval) {
        var attempt = 0
        while true {
            attempt += 1
            let pass = try await fetchOnce(
                urls: urls, issuer: issuer, transport: transport, clock: clock, deadline: deadline)
            let error: AuthError
            let retryAfter: Duration?
            switch pass {
            case .found(let metadata, let lifetime): return (metadata, lifetime)
            case .failed(let failure, let transient, let after):
                guard transient, attempt < retryPolicy.maximumAttempts else { throw failure }
                error = failure
                retryAfter = after
            }
            let delay = retryAfter?.timeInterval ?? retryPolicy.delay(retry: attempt, random: random())
            let wake = clock.now.addingTimeInterval(delay)
            guard wake < deadline else { throw error }
            log.debug(
                "discovery attempt \(attempt) failed (\(error.errorKind.rawValue)); retrying in \(Int(delay * 1000)) ms"
            )
            try await clock.sleep(until: wake)
        }
    }

    /// Tries each discovery URL in order once. A definitive answer (verified metadata, or metadata
    /// that fails verification) ends the pass; a transient failure is remembered and the next URL
    /// tried; the pass is transient when any URL failed transiently.
    private static func fetchOnce(
        urls: [String], issuer: String, transport: any HTTPTransport, clock: any AuthClock, deadline: Date
    ) async throws -> Pass {
        var lastStatus = 0
        var transientFailure: AuthError?
        var retryAfter: Duration?
        for url in urls {
            guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
            var headers = HTTPHeaders()
            headers.add(name: "Accept", value: "application/json")
            let request = HTTPRequest(method: "GET", url: url, headers: headers, timeout: timeout)
            let response: HTTPResponse
            do {
                response = try await AuthorizationServerCall.send(request, to: "issuer's metadata", over: transport)
            } catch AuthError.endpoint(let endpoint, let cause) {
                // A TLS failure is final: every discovery URL is on the issuer's host, behind the
                // same certificate.
                guard cause.isRetryable else { throw AuthError.endpoint(endpoint, cause) }
                if case .timeout = cause, clock.now >= deadline { throw AuthError.timeout }
                transientFailure = .endpoint(endpoint, cause)
                continue
            }
            let status = response.status
            guard status == 200 else {
                lastStatus = status
                if AuthorizationServerCall.isTransient(status: status) {
                    transientFailure = .discovery("the metadata could not be fetched (HTTP \(status))")
                    if status == 429 || status == 503 {
                        retryAfter = TokenResponseParser.parseRetryAfter(response.headers["Retry-After"]) ?? retryAfter
                    }
                }
                continue
            }
            return .found(
                try AuthorizationServerMetadata.parse(response.body, expectedIssuer: issuer),
                lifetime: ResourceAuthorization.lifetime(cacheControl: response.headers["Cache-Control"]))
        }
        if let transientFailure { return .failed(transientFailure, transient: true, retryAfter: retryAfter) }
        return .failed(
            .discovery("no metadata found for the issuer (last answer HTTP \(lastStatus))"), transient: false,
            retryAfter: nil)
    }
}
