import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// What a person must do to log in: the `auth-prompt` notification (SPEC §5.4). Every text in it
/// comes (in part) from the authorization server, so each is a ``ServerText``.
public struct LoginPrompt: Sendable, Equatable {
    /// Whether the person opens a URL in a browser or enters a code on another device.
    public enum Kind: String, Sendable {
        case browser
        case device
    }

    /// The longest URL shown, in bytes (an authorization URL is built from the configuration and
    /// the server's endpoint, both checked; a longer one is refused before it is shown).
    public static let maximumURLBytes = 8192

    /// The environment name.
    public let environment: String
    /// The profile name.
    public let profile: String
    /// The kind of login.
    public let kind: Kind
    /// The authorization URL (browser) or the verification URI (device). Meant to be shown: it
    /// carries `state`, `nonce` and the code challenge, never a secret.
    public let url: ServerText
    /// The user code to enter (device).
    public let userCode: ServerText?
    /// The verification URI with the code filled in, when the server gives one (device).
    public let verificationURIComplete: ServerText?
    /// When the login stops waiting.
    public let expiresAt: Date

    /// A prompt; the URLs are cleaned with the bound ``maximumURLBytes``, the code with the
    /// default one.
    public init(
        environment: String, profile: String, kind: Kind, url: String, userCode: String? = nil,
        verificationURIComplete: String? = nil, expiresAt: Date
    ) {
        self.environment = environment
        self.profile = profile
        self.kind = kind
        self.url = ServerText(url, maximumBytes: Self.maximumURLBytes)
        self.userCode = userCode.map { ServerText($0) }
        self.verificationURIComplete = verificationURIComplete.map {
            ServerText($0, maximumBytes: Self.maximumURLBytes)
        }
        self.expiresAt = expiresAt
    }
}

/// Who logged in, from a validated ID token. The claims are the server's text: cleaned, they are
/// what `login`, `status` and the terminal show.
public struct LoginIdentity: Sendable, Equatable {
    /// The `sub` claim.
    public let subject: ServerText
    /// The `email` claim, if present.
    public let email: ServerText?
    /// The `name` claim, if present.
    public let name: ServerText?
    /// The `sub` claim as the server sent it: compared with the `sub` of a later ID token (a
    /// renewal's), never shown.
    let rawSubject: String

    /// An identity from the claims as the server sent them.
    public init(subject: String, email: String? = nil, name: String? = nil) {
        self.subject = ServerText(subject)
        self.email = email.map { ServerText($0) }
        self.name = name.map { ServerText($0) }
        rawSubject = subject
    }
}

/// What `login` answers.
public struct LoginResult: Sendable, Equatable {
    /// The new access token's expiry, if known.
    public let expiresAt: Date?
    /// Who logged in (OpenID Connect profiles).
    public let identity: LoginIdentity?
}

/// Digests of the authorization codes a session exchanged: at most ``capacity``, oldest dropped.
struct ConsumedCodes {
    static let capacity = 1024
    private var order: [[UInt8]] = []
    private var members: Set<[UInt8]> = []

    /// Records `digest`; false when it was already there (the code must not be exchanged again).
    mutating func insert(_ digest: [UInt8]) -> Bool {
        guard members.insert(digest).inserted else { return false }
        order.append(digest)
        if order.count > Self.capacity { members.remove(order.removeFirst()) }
        return true
    }

    var count: Int { order.count }
}

extension TokenManager {
    /// An interactive login in progress, shared by its callers. Must only be accessed from the
    /// manager's isolation.
    final class LoginFlight {
        let id: UInt64
        /// The login gives up waiting for the person then.
        let deadline: Date
        /// The session's generation at the start (a logout meanwhile makes it commit nothing).
        let generation: UInt64
        var waiters: [UInt64: CheckedContinuation<LoginResult, any Error>] = [:]
        /// Set once a token request that may redeem the grant went out: from then on the login runs to
        /// completion and commits, whoever left.
        var sent = false
        /// The session's logout epoch in the store, read under the login lease (a logout in any
        /// process after it makes the commit write nothing).
        var logoutEpoch: Int64?
        /// Where a pasted redirect URL goes while an authorization-code login waits for its callback.
        var paste: PastedCallbacks?
        var task: Task<Void, Never>?

        init(id: UInt64, deadline: Date, generation: UInt64) {
            self.id = id
            self.deadline = deadline
            self.generation = generation
        }
    }

    /// Failed logins allowed per session in ``loginFailureWindow``.
    public static let loginFailureLimit = 3
    /// The failed-login window.
    public static let loginFailureWindow: TimeInterval = 600

    /// Logs a person in to the interactive session `key` (SPEC §5.4), or joins the login already in
    /// progress: one prompt (an ``AuthEvent/prompt(_:)`` event), one code exchange, however many
    /// callers. Answers once the tokens are stored. A caller that is cancelled leaves at once; the
    /// login stops when the last one leaves before the grant was redeemed. `openBrowser: false`
    /// only shows the URL even when the profile would open a browser.
    ///
    /// One login per session holds within this process (the session's ``LoginFlight``). Across
    /// processes it needs the store's lease (issue 13, not on main yet): `runLogin` is the place to
    /// take it before prompting, re-read the store under it (another process may have logged in
    /// meanwhile: then adopt that session instead of prompting) and release it after the commit.
    public func login(_ key: SessionKey, openBrowser: Bool = true) async throws -> LoginResult {
        try Task.checkCancellation()
        guard !closed else { throw AuthError.shuttingDown }
        guard let session = sessions[key] else { throw AuthError.configuration("unknown session \(key)") }
        guard let settings = session.configuration.grant.interactive else {
            throw AuthError.configuration(
                "profile '\(key.profile)' (\(key.grant)) does not log in interactively; it needs no login")
        }
        let flight: LoginFlight
        if let current = session.login {
            flight = current
        } else {
            let now = clock.now
            session.failedLogins.removeAll { now.timeIntervalSince($0) >= Self.loginFailureWindow }
            guard session.failedLogins.count < Self.loginFailureLimit else { throw AuthError.loginAttemptsExceeded }
            flight = LoginFlight(
                id: nextID(), deadline: now.addingTimeInterval(settings.timeout.timeInterval),
                generation: session.generation)
            session.login = flight
            let flightID = flight.id
            flight.task = Placement.task(.executor(taskExecutor)) {
                await self.runLogin(key, flightID: flightID, openBrowser: openBrowser)
            }
        }
        let waiterID = nextID()
        let flightID = flight.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    dropLoginWaiter(key, flightID: flightID, waiterID: nil)
                } else {
                    flight.waiters[waiterID] = continuation
                }
            }
        } onCancel: {
            Placement.task(.executor(taskExecutor)) {
                await self.dropLoginWaiter(key, flightID: flightID, waiterID: waiterID)
            }
        }
    }

    /// Stops every login in progress that has not redeemed its grant (``close()``).
    func endLogins() {
        for session in sessions.values {
            guard let flight = session.login, !flight.sent else { continue }
            flight.task?.cancel()
            detached[flight.id] = flight.task
            endLogin(session, flight, .failure(.cancelled))
        }
    }

    /// ``AuthError/loginRequired(_:scopes:)`` when the interactive session `key` cannot get a token without
    /// a person (no usable token, no refresh token, after reading the store); nil otherwise. Lets a
    /// call that would only find out later (`subscribe`) fail at once.
    public func loginRequirement(_ key: SessionKey) async -> AuthError? {
        guard let session = sessions[key], session.configuration.grant.interactive != nil else { return nil }
        let needed = AuthError.loginRequired("profile '\(key.profile)' needs a person to log in", scopes: key.scopes)
        if !session.loaded {
            // The store was not read yet: what it holds decides (it is adopted by the first acquisition).
            guard let stored = try? await store.load(storeKey(session)) else { return nil }
            if !session.loaded {
                return stored.refreshToken == nil && stored.accessToken == nil ? needed : nil
            }
        }
        if usableToken(session, now: clock.now) != nil || session.refreshToken != nil || session.flight != nil {
            return nil
        }
        return needed
    }

    /// The session's store key (interactive sessions have no seed).
    func storeKey(_ session: Session) -> StoreKey {
        if let known = session.storeKey { return known }
        let key = StoreKey(session: session.key)
        session.storeKey = key
        return key
    }

    /// How many callers wait on the session's login (tests).
    func loginWaiterCount(_ key: SessionKey) -> Int { sessions[key]?.login?.waiters.count ?? 0 }

    /// Answers one cancelled caller; when none is left and nothing was redeemed, the login stops.
    private func dropLoginWaiter(_ key: SessionKey, flightID: UInt64, waiterID: UInt64?) {
        guard let session = sessions[key], let flight = session.login, flight.id == flightID else { return }
        if let waiterID, let waiter = flight.waiters.removeValue(forKey: waiterID) {
            waiter.resume(throwing: CancellationError())
        }
        if flight.waiters.isEmpty && !flight.sent {
            flight.task?.cancel()
            detached[flight.id] = flight.task
            endLogin(session, flight, .failure(.cancelled))
        }
    }

    private func runLogin(_ key: SessionKey, flightID: UInt64, openBrowser: Bool) async {
        defer { detached[flightID] = nil }
        guard let session = sessions[key], let flight = session.login, flight.id == flightID else { return }
        let result: Result<LoginResult, AuthError>
        do {
            result = .success(try await performLogin(session, flight, openBrowser: openBrowser))
        } catch let error as AuthError {
            result = .failure(error)
        } catch {
            result = .failure(.cancelled)
        }
        endLogin(session, flight, result)
    }

    /// Ends `flight` once: counts a failure, answers every caller.
    private func endLogin(_ session: Session, _ flight: LoginFlight, _ result: Result<LoginResult, AuthError>) {
        guard session.login === flight else { return }
        session.login = nil
        if case .failure(let error) = result {
            session.failedLogins.append(clock.now)
            if error != .cancelled && error != .loggedOut { session.lastError = error }
            log.info("login for \(session.key) failed: \(error.description)")
        }
        let waiters = flight.waiters
        flight.waiters = [:]
        for waiter in waiters.values { waiter.resume(with: result.mapError { $0 as any Error }) }
    }

    /// Marks the login as redeeming its grant, unless it was abandoned or the session logged out.
    func markLoginSent(_ session: Session, _ flight: LoginFlight) throws {
        guard session.login === flight, !closed, !Task.isCancelled, session.generation == flight.generation else {
            throw CancellationError()
        }
        TokenRequestWatch.willSend()
        flight.sent = true
    }

    /// Runs the profile's flow, validates the ID token (OpenID Connect), commits the tokens.
    private func performLogin(_ session: Session, _ flight: LoginFlight, openBrowser: Bool) async throws
        -> LoginResult
    {
        let configuration = session.configuration
        guard let settings = configuration.grant.interactive else { throw AuthError.cancelled }
        // One login per session across processes: the store's login lease, held until the commit.
        // Under it the store is read again: another process may have logged in meanwhile.
        let storeKey = storeKey(session)
        if !session.loaded { try await reload(session, storeKey) }
        let hadToken = usableToken(session, now: clock.now) != nil
        let lease = try await store.acquireLease(
            storeKey, purpose: .login, deadline: flight.deadline,
            expiresAt: flight.deadline.addingTimeInterval(configuration.acquisitionTimeout.timeInterval))
        // Released on every way out, which needs every way out to come: each wait below is
        // bounded by the flight's deadline and ends at once when the login is cancelled (the
        // loopback listener's thread included: nothing a connection does can hold it).
        defer { store.releaseLease(lease) }
        try Task.checkCancellation()
        flight.logoutEpoch = try await readLogoutEpoch(storeKey)
        try await reload(session, storeKey)
        if !hadToken, session.generation == flight.generation, let token = usableToken(session, now: clock.now) {
            session.interactionRequired = false
            log.info("login for \(session.key): another process logged in meanwhile; using its session")
            return LoginResult(expiresAt: token.expiresAt, identity: session.identity)
        }
        let traffic = traffic(for: session.key)
        let metadata: AuthorizationServerMetadata?
        if let issuer = configuration.issuer {
            metadata = try await traffic.discovery.metadata(for: issuer, deadline: flight.deadline)
        } else {
            metadata = nil
        }
        let endpoint = try await tokenEndpoint(
            for: configuration, discovery: traffic.discovery, deadline: flight.deadline)
        let credential = try await ClientCredential.resolve(configuration, tokenEndpoint: endpoint)
        let opener = openBrowser ? settings.openBrowser : nil
        switch settings.flow {
        case .authorizationCode(let ports, let path):
            return try await authorizationCodeLogin(
                session, flight, settings: settings, ports: ports, path: path, metadata: metadata, endpoint: endpoint,
                credential: credential, opener: opener)
        case .deviceCode:
            let response = try await deviceCodeLogin(
                session, flight, settings: settings, metadata: metadata, endpoint: endpoint, credential: credential,
                opener: opener)
            return try await store(response, session, flight, nonce: nil, metadata: metadata, keys: nil)
        }
    }

    /// Emits the prompt and opens the browser when allowed.
    func prompt(
        _ session: Session, _ flight: LoginFlight, kind: LoginPrompt.Kind, url: String, userCode: String? = nil,
        verificationURIComplete: String? = nil, expiresAt: Date? = nil, opener: (@Sendable (String) async -> Void)?,
        openURL: String? = nil
    ) {
        let shown = LoginPrompt(
            environment: session.key.environment, profile: session.key.profile, kind: kind, url: url,
            userCode: userCode, verificationURIComplete: verificationURIComplete,
            expiresAt: expiresAt ?? flight.deadline)
        emit(.prompt(shown))
        sessionChanged(session, .loginRequired, login: shown)
        if let opener {
            let target = openURL ?? url
            Placement.task(.executor(taskExecutor)) { await opener(target) }
        }
    }

    /// Validates the ID token (OpenID Connect), then commits the tokens and makes them the session's.
    func store(
        _ response: TokenResponse, _ session: Session, _ flight: LoginFlight, nonce: String?,
        metadata: AuthorizationServerMetadata?, keys: Task<JSONWebKeySet, any Error>?
    ) async throws -> LoginResult {
        if flight.sent == false { flight.sent = true }
        var identity: LoginIdentity?
        let configuration = session.configuration
        if configuration.isOpenIDConnect {
            identity = try await validateIDToken(
                response.idToken, key: session.key, configuration: configuration, metadata: metadata, nonce: nonce,
                keys: keys)
        }
        guard sessions[session.key] === session else {
            throw AuthError.cancelled  // removed meanwhile: commit nothing
        }
        guard session.generation == flight.generation else { throw AuthError.loggedOut }
        // The login lease is not the renewal lease (a login waiting for a person does not stop
        // the session's renewals everywhere); the renewal lease is taken around the commit only,
        // so that a renewal under way elsewhere never commits over the login's tokens: it either
        // commits first, or waits and then re-reads the store and finds them.
        let storeKey = storeKey(session)
        let token = try await store.withLease(
            storeKey, purpose: .renewal, deadline: flight.deadline,
            lifetime: configuration.acquisitionTimeout + .seconds(Int(Self.leaseMargin))
        ) {
            try await commit(
                response, previousRefreshToken: nil, session: session, storeKey: storeKey,
                logoutEpoch: flight.logoutEpoch, generation: flight.generation, subject: identity?.rawSubject)
        }
        session.token = token
        session.loaded = true
        session.invalidated = false
        session.interactionRequired = false
        session.lastError = nil
        session.identity = identity
        session.idToken = identity == nil ? nil : response.idToken
        session.counters.acquisitions += 1
        sessionChanged(session, .loggedIn)
        return LoginResult(expiresAt: token.expiresAt, identity: identity)
    }
}
