import TokenRelayHTTP

/// What ``CredentialsMiddleware`` does after an answer, or after its source could not give a
/// credential (SPEC §5.3, §9.1, §9.2, §9.6, §10 DPoP): pure, no I/O, decided on a snapshot of the
/// answer, of what was already done for the request and of the recovery budget. The middleware
/// only performs what it says.
///
/// Two policies:
/// - ``Policy/request`` (`request`, `subscribe`): after `401 invalid_token` only a bodyless `GET`,
///   `HEAD` or `OPTIONS` is replayed (any other request still invalidates the refused token); a
///   login or a step-up is never started here: the next request asks for it (`interaction_required`).
/// - ``Policy/forwarding`` (`mcp-proxy`): any method may be sent again after a 401 (the server did
///   not act on it); a person's login, a registration made again and a step-up start, and the
///   message goes again once.
///
/// In both, a DPoP nonce challenge is signed again once with the server's nonce (any method), and
/// a request sent without a credential because its discovered profile has no session yet (SPEC
/// §9.1: discovery starts from the resource's own answer) is sent again with one after its 401
/// resolved the session; any other answer to it is the caller's (the resource needs no token).
public struct CredentialRecovery: Sendable, Equatable {
    /// Whose request it is.
    public enum Policy: Sendable, Equatable {
        /// A `request` or a subscription's connection.
        case request
        /// A message forwarded by `mcp-proxy`.
        case forwarding
    }

    public let policy: Policy
    /// Whether the request may be replayed under ``Policy/request``: a bodyless `GET`, `HEAD` or `OPTIONS`.
    public let replayable: Bool
    /// Whether a renewal may cure a refused credential (OAuth tokens; not static secrets).
    public let renewable: Bool
    /// Whether the profile is discovered from the resource (`discover: true`): its challenges
    /// resolve its session again or step it up.
    public let discovered: Bool

    public init(policy: Policy, replayable: Bool, renewable: Bool, discovered: Bool) {
        self.policy = policy
        self.replayable = replayable
        self.renewable = renewable
        self.discovered = discovered
    }

    /// What was done already for this request (each at most once).
    public struct Progress: Sendable, Equatable {
        /// Signed again with a DPoP nonce.
        public var signedAgain = false
        /// Replayed after a refused credential (renewed, or its session resolved again).
        public var replayed = false
        /// Stepped up after `403 insufficient_scope`.
        public var steppedUp = false
        /// A person logged in for it.
        public var loggedIn = false
        /// Registered again after `invalid_client`.
        public var registeredAgain = false

        public init(
            signedAgain: Bool = false, replayed: Bool = false, steppedUp: Bool = false, loggedIn: Bool = false,
            registeredAgain: Bool = false
        ) {
            self.signedAgain = signedAgain
            self.replayed = replayed
            self.steppedUp = steppedUp
            self.loggedIn = loggedIn
            self.registeredAgain = registeredAgain
        }
    }

    /// An answer as the decision sees it.
    public struct Answer: Sendable, Equatable {
        public var status: Int
        /// The request carried a credential (false: sent without one, no session yet).
        public var credentialed: Bool
        /// A `use_dpop_nonce` challenge that brought a new nonce.
        public var nonceChallenge: Bool
        /// `401` with a `Bearer` or `DPoP` challenge carrying `error="invalid_token"`.
        public var invalidToken: Bool
        /// The `Bearer` challenge's `resource_metadata`.
        public var resourceMetadata: String?
        /// `403` with a `Bearer` challenge carrying `error="insufficient_scope"`.
        public var insufficientScope: Bool
        /// The `Bearer` challenge's `scope`, split.
        public var scopes: [String]?

        public init(
            status: Int, credentialed: Bool = true, nonceChallenge: Bool = false, invalidToken: Bool = false,
            resourceMetadata: String? = nil, insufficientScope: Bool = false, scopes: [String]? = nil
        ) {
            self.status = status
            self.credentialed = credentialed
            self.nonceChallenge = nonceChallenge
            self.invalidToken = invalidToken
            self.resourceMetadata = resourceMetadata
            self.insufficientScope = insufficientScope
            self.scopes = scopes
        }

        /// The snapshot of `status` and `headers`.
        public init(status: Int, headers: HTTPHeaders, credentialed: Bool, nonceChallenge: Bool) {
            let bearer =
                status == 401 || status == 403
                ? WWWAuthenticateChallenge.parse(headers: headers).first { $0.isScheme("Bearer") } : nil
            self.init(
                status: status, credentialed: credentialed, nonceChallenge: nonceChallenge,
                invalidToken: CredentialsMiddleware.isInvalidToken(status: status, headers: headers),
                resourceMetadata: status == 401 ? bearer?.parameter("resource_metadata") : nil,
                insufficientScope: status == 403 && bearer?.parameter("error") == "insufficient_scope",
                scopes: bearer?.parameter("scope").map { $0.split(separator: " ").map(String.init) })
        }
    }

    /// What to do with an answer.
    public enum Decision: Sendable, Equatable {
        /// The answer is the caller's.
        case returnAnswer
        /// Sign the request again with the server's new DPoP nonce and send it once more.
        case signAgain
        /// Invalidate the credential the request was signed with, apply a fresh one and replay.
        case invalidateAndReplay
        /// Invalidate the credential the request was signed with; the answer is the caller's.
        case invalidateAndReturn
        /// Resolve the discovered session again from the challenge (`hint`: its
        /// `resource_metadata`), after invalidating the refused credential when `invalidate`; then
        /// replay with the session's credential (`replay`) or return the answer.
        case resolveAgain(hint: String?, scopes: [String]?, invalidate: Bool, replay: Bool)
        /// Ask for the union of the session's scopes and `scopes` from now on; then send again
        /// (`replay`: a login starts when the session needs one) or return the answer.
        case stepUp(scopes: [String], replay: Bool)
    }

    /// The decision on `answer`, with `progress` done and the budget's replay `budgetAvailable`.
    public func after(_ answer: Answer, progress: Progress, budgetAvailable: Bool) -> Decision {
        guard answer.credentialed else {
            // SPEC §9.1: sent without a credential (no session yet); only a 401 starts discovery,
            // and the request, which the server did not act on, goes again with the credential.
            guard answer.status == 401, discovered else { return .returnAnswer }
            return .resolveAgain(hint: answer.resourceMetadata, scopes: answer.scopes, invalidate: false, replay: true)
        }
        if answer.nonceChallenge && !progress.signedAgain && !progress.replayed { return .signAgain }
        switch policy {
        case .request: return afterRequest(answer, progress: progress, budgetAvailable: budgetAvailable)
        case .forwarding: return afterForwarded(answer, progress: progress, budgetAvailable: budgetAvailable)
        }
    }

    private func afterRequest(_ answer: Answer, progress: Progress, budgetAvailable: Bool) -> Decision {
        let refused = renewable && answer.invalidToken && !progress.replayed
        if refused && replayable && budgetAvailable { return .invalidateAndReplay }
        if discovered && answer.status == 401, let hint = answer.resourceMetadata {
            return .resolveAgain(hint: hint, scopes: answer.scopes, invalidate: refused, replay: false)
        }
        if refused { return .invalidateAndReturn }
        if discovered && answer.insufficientScope { return .stepUp(scopes: answer.scopes ?? [], replay: false) }
        return .returnAnswer
    }

    private func afterForwarded(_ answer: Answer, progress: Progress, budgetAvailable: Bool) -> Decision {
        if answer.status == 401 && !progress.replayed && budgetAvailable {
            // Whatever the challenge says: the server did not act on the message.
            if discovered {
                return .resolveAgain(
                    hint: answer.resourceMetadata, scopes: answer.scopes, invalidate: renewable, replay: true)
            }
            if renewable { return .invalidateAndReplay }
        }
        if discovered && answer.insufficientScope && !progress.steppedUp {
            return .stepUp(scopes: answer.scopes ?? [], replay: true)
        }
        return .returnAnswer
    }

    /// After the session was resolved again for a forwarded message's 401: the scopes its
    /// challenge names and the session lacks (MCP authorization: the challenge's scopes are
    /// authoritative for the request), asked for from now on; `nil` when it holds them all.
    public func missingScopes(challenged: [String]?, held: [String]) -> [String]? {
        guard policy == .forwarding, let challenged, !Set(challenged).isSubset(of: Set(held)) else { return nil }
        return challenged
    }

    /// What to do when the source could not give a credential.
    public enum Refusal: Sendable, Equatable {
        /// The error is the caller's.
        case fail
        /// A person logs in (joining a login in progress), then the credential is asked for again.
        case logIn
        /// The source dropped a registration the server refused: ask again (it registers anew).
        case applyAgain
    }

    /// The decision when the source threw: `interactionRequired` (the session needs a person),
    /// `invalidClient` (a discovered profile's registration was refused).
    public func afterRefusal(interactionRequired: Bool, invalidClient: Bool, progress: Progress) -> Refusal {
        guard policy == .forwarding else { return .fail }
        if interactionRequired && !progress.loggedIn { return .logIn }
        if invalidClient && discovered && !progress.registeredAgain { return .applyAgain }
        return .fail
    }
}
