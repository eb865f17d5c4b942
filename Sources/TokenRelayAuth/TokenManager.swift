import FoundationEssentials
import Synchronization
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// Owns every OAuth session: hands out tokens, acquires and renews them single-flight, commits
/// rotated refresh tokens to the store before anyone sees the new access token, and decides
/// recoveries (conditional invalidation, excessive-renewal protection).
///
/// All state lives on this actor; network and store calls happen in one unstructured task per
/// acquisition ("flight") whose decisions (``RenewalFlight``) read the session afresh each time.
public actor TokenManager {
    /// One waiting caller.
    struct Waiter {
        let continuation: CheckedContinuation<Token, any Error>
        var timer: Task<Void, Never>?
    }

    /// One acquisition or renewal in progress, shared by its waiters.
    final class Flight {
        let id: UInt64
        /// The flight's own bound: the configuration's acquisition timeout from its start, never a
        /// caller's deadline (a request already sent must not be aborted because its caller left).
        let deadline: Date
        var waiters: [UInt64: Waiter] = [:]
        /// Set just before the token request goes out; from then on the flight is never cancelled.
        var sent = false
        /// Whether the session held a token when the flight started talking to the server.
        var isRenewal = false
        /// The session's generation when the flight started.
        var generation: UInt64 = 0
        /// The longest validity a waiter asked for (`min_valid`): a stored token that does not
        /// last that long is renewed instead of being handed out.
        var minimumValidity: Duration?
        var task: Task<Void, Never>?

        init(id: UInt64, deadline: Date) {
            self.id = id
            self.deadline = deadline
        }
    }

    /// The state of one session. Must only be accessed from the manager's isolation.
    final class Session {
        let key: SessionKey
        var configuration: OAuthClientConfiguration
        /// Where the session lives in the store: known at registration, except for
        /// `refresh_token` grants (it includes the seed's fingerprint, resolved on first use).
        var storeKey: StoreKey?
        /// Whether the store was read (cleared when another process changed the store).
        var loaded = false
        /// The store revision the token came from or was committed as (`nil`: none).
        var revision: Int64?
        /// Whether the held token was read from the store rather than obtained by this process.
        var tokenFromStore = false
        var token: Token?
        /// The token was invalidated (401 recovery or `token-invalidate`) and must be renewed.
        var invalidated = false
        var refreshToken: String?
        /// A rotated refresh token the store failed to commit, with what the commit was to write
        /// and the revision of the entry that still holds the spent one it replaced (`nil`: no
        /// entry). Re-reading that entry keeps the rotated token (the stored one would be a
        /// replay); a newer entry replaces both. The commit is tried again on the next use and
        /// at close (``TokenManager/commitUnsaved(_:_:)``).
        var unsavedRotation: UnsavedCommit?
        /// The refresh token was refused; only `logout` clears this.
        var interactionRequired = false
        var flight: Flight?
        /// When unexplained renewals (401 recoveries) happened, within the window.
        var unexplained: [Date] = []
        /// Renewals are refused until then.
        var blockedUntil: Date?
        var lastError: AuthError?
        var counters = SessionStatus.Counters()
        /// Bumped by `logout`; a flight started before it commits nothing.
        var generation: UInt64 = 0
        /// The interactive login in progress (one per session at a time).
        var login: LoginFlight?
        /// When logins of this session failed, within the window (SPEC §5.4: at most 3 in 10 minutes).
        var failedLogins: [Date] = []
        /// Digests of the authorization codes this session already exchanged.
        var consumedCodes = ConsumedCodes()
        /// Who logged in (OpenID Connect), when known: from this process's login or renewal, or
        /// (its `sub` only) from the store.
        var identity: LoginIdentity?
        /// The validated ID token of this process's last login or renewal (memory only, never
        /// stored): what a token exchange with `subject: { profile, token: id_token }` presents.
        var idToken: String?
        /// DPoP: the session's key, made before its first token request and kept with its tokens
        /// (read from the store, shared by the host's processes); dropped with them (`logout`).
        var dpopKey: DPoPKey?
        /// Mutual TLS: the client certificate and key, as last read (each acquisition reads them again).
        var clientIdentity: ClientIdentity?

        init(key: SessionKey, configuration: OAuthClientConfiguration) {
            self.key = key
            self.configuration = configuration
            // Known now for every grant but a `refresh_token` seed's (its fingerprint is part of it).
            if case .refreshToken = configuration.grant {} else { storeKey = StoreKey(session: key) }
        }
    }

    /// Unexplained renewals allowed per window.
    public static let renewalLimit = 5
    /// The excessive-renewal window.
    public static let renewalWindow: TimeInterval = 30

    /// Where tokens are committed (before callers see them).
    let store: any TokenStore
    /// The last DPoP nonce of each server (token endpoints and resources alike).
    let dpopNonces = DPoPNonces()
    /// Sends grant requests with retries (sessions of environments without a transport of their own).
    let endpointClient: TokenEndpointClient
    /// Verified, cached issuer metadata (sessions of environments without a transport of their own).
    let discovery: DiscoveryClient
    /// Token, discovery, JWKS and revocation traffic per environment name, through that
    /// environment's transport (its `ca_file`, `proxy`, `connect_timeout`; SPEC §5.2). Guarded by
    /// the mutex: a configuration reload replaces the entries of environments it replaces.
    let environmentTraffic: Mutex<[String: TokenTraffic]>
    /// Builds the clients of one environment's transport.
    let makeTraffic: @Sendable (any HTTPTransport) -> TokenTraffic
    /// The time source.
    let clock: any AuthClock
    /// Every registered session.
    var sessions: [SessionKey: Session] = [:]
    /// SHA-256 digests of the configured `refresh_token` seeds already sent to a token endpoint;
    /// such a seed is spent (or rotated) and is never sent again (the store remembers them across
    /// processes too).
    var consumedSeeds: Set<[UInt8]> = []
    /// Issuers' signing keys by verified `jwks_uri` (OpenID Connect logins).
    var jwksCache: [String: JSONWebKeySet] = [:]
    /// Where the manager's own tasks run (flights, callers' deadlines, logins' steps, discovery):
    /// the process's own tasks' place (``Placement/ownTasks``) when the manager was made.
    nonisolated let taskExecutor: (any TaskExecutor)?
    /// Test hook: awaited right after a renewal lease is taken (end-to-end tests hold a holder there).
    let afterLease: (@Sendable () async -> Void)?
    private var lastID: UInt64 = 0
    /// Set by `close()`; no new acquisitions after it.
    var closed = false
    /// What the watchers of sessions last saw (SPEC §13.1); `nil` while nobody watches.
    var watch: SessionWatch?
    /// Abandoned flights still running (they can no longer send); awaited by tests and `close()`.
    var detached: [UInt64: Task<Void, Never>] = [:]

    /// `auth-failed` and other events, for the Relay to turn into notifications.
    public nonisolated let events: AsyncStream<AuthEvent>
    private let eventContinuation: AsyncStream<AuthEvent>.Continuation

    /// Creates a manager sending token and discovery requests through `transport` (which must
    /// follow no redirects), or, for sessions of an environment named in `environmentTransports`,
    /// through that environment's transport. Its own tasks run where the process's own tasks run
    /// (``Placement``).
    public init(
        transport: any HTTPTransport, environmentTransports: [String: any HTTPTransport] = [:],
        store: any TokenStore = InMemoryTokenStore(),
        clock: any AuthClock = SystemAuthClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        retryPolicy: RetryPolicy = RetryPolicy(),
        discoveryTimeToLive: Duration = .seconds(3600),
        afterLease: (@Sendable () async -> Void)? = nil
    ) {
        self.store = store
        let taskExecutor = Placement.ownTasks
        self.taskExecutor = taskExecutor
        self.afterLease = afterLease
        self.clock = clock
        endpointClient = TokenEndpointClient(
            transport: transport, clock: clock, random: random, retryPolicy: retryPolicy)
        discovery = DiscoveryClient(
            transport: transport, clock: clock, timeToLive: discoveryTimeToLive, random: random,
            retryPolicy: retryPolicy, taskExecutor: taskExecutor)
        let makeTraffic: @Sendable (any HTTPTransport) -> TokenTraffic = { transport in
            TokenTraffic(
                endpoint: TokenEndpointClient(
                    transport: transport, clock: clock, random: random, retryPolicy: retryPolicy),
                discovery: DiscoveryClient(
                    transport: transport, clock: clock, timeToLive: discoveryTimeToLive, random: random,
                    retryPolicy: retryPolicy, taskExecutor: taskExecutor))
        }
        self.makeTraffic = makeTraffic
        environmentTraffic = Mutex(environmentTransports.mapValues(makeTraffic))
        (events, eventContinuation) = AsyncStream.makeStream(of: AuthEvent.self, bufferingPolicy: .bufferingNewest(256))
    }

    /// Declares a session (validating its configuration) and returns its key. Registering the
    /// same key again replaces the configuration and keeps the session's tokens.
    @discardableResult
    public func register(environment: String, profile: String, configuration: OAuthClientConfiguration)
        throws(AuthError)
        -> SessionKey
    {
        try configuration.validate()
        let key = SessionKey(environment: environment, profile: profile, configuration: configuration)
        if let session = sessions[key] {
            session.configuration = configuration
        } else {
            sessions[key] = Session(key: key, configuration: configuration)
        }
        return key
    }

    /// A usable access token for `key`: the held one, or one acquired/renewed single-flight.
    /// A cancelled caller gets `CancellationError` at once; one whose `deadline` passes gets
    /// ``AuthError/timeout`` at once. Neither disturbs the other callers.
    ///
    /// With `minimumValidity` (a credential helper's `min_valid`), a held token that expires
    /// sooner than that is renewed first; a freshly issued token is returned as it is, even when
    /// the server grants a shorter lifetime (nothing better can be had).
    public func token(for key: SessionKey, deadline: Date? = nil, minimumValidity: Duration? = nil) async throws
        -> Token
    {
        try Task.checkCancellation()
        guard !closed else { throw AuthError.shuttingDown }
        guard let session = sessions[key] else { throw AuthError.configuration("unknown session \(key)") }
        session.counters.requests += 1
        if store.changedElsewhere() { markStale() }
        let now = clock.now
        if let token = usableToken(session, now: now, minimumValidity: minimumValidity) { return token }
        if session.interactionRequired {
            throw session.lastError ?? AuthError.interactionRequired("the refresh token was refused")
        }
        if let until = session.blockedUntil {
            if now < until { throw AuthError.excessiveRenewals }
            session.blockedUntil = nil
        }
        if let deadline, now >= deadline { throw AuthError.timeout }
        let waiterID = nextID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                enqueue(
                    session, waiterID: waiterID, deadline: deadline, minimumValidity: minimumValidity,
                    continuation: continuation)
            }
        } onCancel: {
            Placement.task(.executor(taskExecutor)) {
                await self.dropWaiter(key, waiterID: waiterID, error: CancellationError())
            }
        }
    }

    /// The held token if it may be used at `now` (and stays valid for `minimumValidity`).
    func usableToken(_ session: Session, now: Date, minimumValidity: Duration? = nil) -> Token? {
        guard session.loaded, !session.invalidated, let token = session.token,
            !token.needsRenewal(at: now, skew: session.configuration.expirySkew)
        else { return nil }
        if let minimumValidity, !token.isValid(for: minimumValidity, at: now) { return nil }
        return token
    }

    /// Another process changed the store: every session re-reads it on its next use (a renewal,
    /// `token-invalidate` or `logout` elsewhere is seen at once). Sessions with a flight under way
    /// too: the change check consumed the signal, and the flight's own read may predate the change
    /// (e.g. an invalidation recorded on the entry the flight just committed), so the first use
    /// after the flight re-reads; the flight itself is not disturbed (it never looks at `loaded`
    /// after its start).
    func markStale() {
        for session in sessions.values { session.loaded = false }
        storeChangeSeen()
    }

    /// What `status` shows about the store.
    public nonisolated var storeInfo: TokenStoreInfo { store.info }

    /// `logout --all --forget-key`: removes the secret service's key of the store (an empty
    /// store only, ``SQLiteTokenStore/forgetSecretServiceKey()``); says what was done.
    public nonisolated func forgetStoreKey() async throws -> String {
        guard let sqlite = store as? SQLiteTokenStore else {
            throw AuthError.store(
                "the store's key is not kept by the secret service (the store is not a plain SQLite file)")
        }
        return try await sqlite.forgetSecretServiceKey()
    }

    /// Starts opening the store in the background (``TokenStore/prepare()``): for a one-shot
    /// command whose profile keeps its session there.
    public nonisolated func prepareStore() { store.prepare() }

    /// A fresh number for waiters, flights and token versions (unique within the manager).
    func nextID() -> UInt64 {
        lastID += 1
        return lastID
    }

    private func enqueue(
        _ session: Session, waiterID: UInt64, deadline: Date?, minimumValidity: Duration?,
        continuation: CheckedContinuation<Token, any Error>
    ) {
        if Task.isCancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        let flight = session.flight ?? startFlight(session)
        if let minimumValidity, minimumValidity > (flight.minimumValidity ?? .zero) {
            flight.minimumValidity = minimumValidity
        }
        var waiter = Waiter(continuation: continuation, timer: nil)
        if let deadline {
            let key = session.key
            waiter.timer = Placement.task(.executor(taskExecutor)) { [clock] in
                do { try await clock.sleep(until: deadline) } catch { return }
                await self.dropWaiter(key, waiterID: waiterID, error: AuthError.timeout)
            }
        }
        flight.waiters[waiterID] = waiter
    }

    /// Answers one waiter with `error` (cancellation or its deadline); when it was the last one and
    /// nothing was sent yet, the flight is cancelled and detached (``RenewalFlight/callerLeft(callersLeft:sent:)``).
    func dropWaiter(_ key: SessionKey, waiterID: UInt64, error: any Error) {
        guard let session = sessions[key], let flight = session.flight,
            let waiter = flight.waiters.removeValue(forKey: waiterID)
        else { return }
        waiter.timer?.cancel()
        if RenewalFlight.callerLeft(callersLeft: flight.waiters.count, sent: flight.sent) == .cancelFlight {
            flight.task?.cancel()
            detached[flight.id] = flight.task
            session.flight = nil
        }
        waiter.continuation.resume(throwing: error)
    }

    /// Publishes an event to `events`.
    func emit(_ event: AuthEvent) {
        eventContinuation.yield(event)
    }
}

extension TokenManager {
    /// Ends the event stream (after ``close()``).
    func finishEvents() { eventContinuation.finish() }

    /// Waits for abandoned flights to finish (they send nothing; tests use this to prove it).
    func settleDetached() async {
        while let entry = detached.first {
            await entry.value.value
            detached[entry.key] = nil
        }
    }

    /// How many callers wait on the session's flight (tests).
    func waiterCount(_ key: SessionKey) -> Int { sessions[key]?.flight?.waiters.count ?? 0 }
}

/// The clients one environment's token traffic goes through. Discovery metadata is cached per
/// environment: what one environment's trust settings verified is not trusted by another.
struct TokenTraffic: Sendable {
    let endpoint: TokenEndpointClient
    let discovery: DiscoveryClient
}

extension TokenManager {
    /// The clients that carry `key`'s token, discovery and revocation requests.
    nonisolated func traffic(for key: SessionKey) -> TokenTraffic {
        environmentTraffic.withLock { $0[key.environment] }
            ?? TokenTraffic(endpoint: endpointClient, discovery: discovery)
    }

    /// Sends the token traffic of the named environments through these transports from now on
    /// (a configuration reload that added or replaced them); other environments keep theirs.
    public nonisolated func useTransports(_ transports: [String: any HTTPTransport]) {
        let traffic = transports.mapValues(makeTraffic)
        environmentTraffic.withLock { $0.merge(traffic) { _, new in new } }
    }

    /// Forgets the token traffic of every environment not named in `environments` (a reload
    /// removed them and nothing uses them any more).
    public nonisolated func dropTransports(except environments: Set<String>) {
        environmentTraffic.withLock { traffic in traffic = traffic.filter { environments.contains($0.key) } }
    }

    /// The environments whose token traffic has a transport of its own (tests).
    nonisolated var trafficEnvironments: Set<String> { Set(environmentTraffic.withLock { $0.keys }) }
}
