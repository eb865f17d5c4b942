import Foundation
import HTTP

/// Fetches and caches verified metadata per issuer (single-flight, with a time to live).
public actor DiscoveryClient {
    private struct Entry {
        var metadata: AuthorizationServerMetadata
        var fetchedAt: Date
    }

    private let transport: any HTTPTransport
    private let clock: any AuthClock
    private let timeToLive: TimeInterval
    /// Verified metadata by issuer.
    private var cache: [String: Entry] = [:]
    /// Fetches in progress by issuer; callers share them.
    private var inFlight: [String: Task<AuthorizationServerMetadata, any Error>] = [:]

    /// Creates a client caching metadata for `timeToLive`.
    public init(transport: any HTTPTransport, clock: any AuthClock = SystemAuthClock(), timeToLive: Duration = .seconds(3600)) {
        self.transport = transport
        self.clock = clock
        self.timeToLive = timeToLive.timeInterval
    }

    /// Verified metadata for `issuer`, from the cache or the network. Nothing is cached on failure.
    public func metadata(for issuer: String, deadline: Date) async throws -> AuthorizationServerMetadata {
        if let entry = cache[issuer], clock.now.timeIntervalSince(entry.fetchedAt) < timeToLive {
            return entry.metadata
        }
        if let task = inFlight[issuer] { return try await task.value }
        let task = Task { [transport, clock] in
            try await Self.fetch(issuer: issuer, transport: transport, clock: clock, deadline: deadline)
        }
        inFlight[issuer] = task
        defer { inFlight[issuer] = nil }
        let metadata = try await task.value
        cache[issuer] = Entry(metadata: metadata, fetchedAt: clock.now)
        return metadata
    }

    /// Forgets cached metadata (all issuers).
    public func clear() { cache.removeAll() }

    private static func fetch(
        issuer: String, transport: any HTTPTransport, clock: any AuthClock, deadline: Date
    ) async throws -> AuthorizationServerMetadata {
        var lastStatus = 0
        for url in try AuthorizationServerMetadata.discoveryURLs(for: issuer) {
            let remaining = deadline.timeIntervalSince(clock.now)
            guard remaining > 0 else { throw AuthError.timeout }
            var headers = HTTPHeaders()
            headers.add(name: "Accept", value: "application/json")
            let request = HTTPRequest(
                method: "GET", url: url, headers: headers, timeout: .milliseconds(Int64(max(1, remaining * 1000))))
            let response: HTTPResponse
            do {
                response = try await transport.send(request)
            } catch let error as HTTPError {
                switch error {
                case .transport(let reason): throw AuthError.transport(reason)
                case .timeout: throw AuthError.timeout
                case .cancelled: throw CancellationError()
                case .bodyTooLarge: throw AuthError.discovery("the metadata is too large")
                case .invalidURL(let reason): throw AuthError.configuration("issuer: \(reason)")
                }
            }
            guard response.status == 200 else {
                lastStatus = response.status
                continue
            }
            return try AuthorizationServerMetadata.parse(response.body, expectedIssuer: issuer)
        }
        throw AuthError.discovery("no metadata found for the issuer (last answer HTTP \(lastStatus))")
    }
}
