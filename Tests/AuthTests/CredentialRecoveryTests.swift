import Testing

@testable import TokenRelayAuth
@testable import TokenRelayHTTP

/// The credentials middleware's decisions (``CredentialRecovery``) on their own: no source, no
/// network. One table per policy; the middleware only performs what a row says.
@Suite struct CredentialRecoveryTests {
    typealias Answer = CredentialRecovery.Answer
    typealias Progress = CredentialRecovery.Progress

    static let get = CredentialRecovery(policy: .request, replayable: true, renewable: true, discovered: false)
    static let post = CredentialRecovery(policy: .request, replayable: false, renewable: true, discovered: false)
    static let secret = CredentialRecovery(policy: .request, replayable: true, renewable: false, discovered: false)
    static let discoveredGet = CredentialRecovery(
        policy: .request, replayable: true, renewable: true, discovered: true)
    static let discoveredPost = CredentialRecovery(
        policy: .request, replayable: false, renewable: true, discovered: true)
    static let forwarded = CredentialRecovery(
        policy: .forwarding, replayable: false, renewable: true, discovered: false)
    static let forwardedDiscovered = CredentialRecovery(
        policy: .forwarding, replayable: false, renewable: true, discovered: true)

    static let invalidToken = Answer(status: 401, invalidToken: true)
    static let nonce = Answer(status: 401, nonceChallenge: true)
    static let hint = "https://api.example/.well-known/oauth-protected-resource/mcp"

    /// One row of the table.
    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let recovery: CredentialRecovery
        let answer: Answer
        var progress = Progress()
        var budget = true
        let decision: CredentialRecovery.Decision
        var testDescription: String { name }
    }

    static let requestRows: [Row] = [
        Row(name: "a 2xx is returned", recovery: get, answer: Answer(status: 200), decision: .returnAnswer),
        Row(
            name: "401 invalid_token on a bodyless GET: invalidated and replayed", recovery: get,
            answer: invalidToken, decision: .invalidateAndReplay),
        Row(
            name: "401 invalid_token on a POST or a body: invalidated, not replayed", recovery: post,
            answer: invalidToken, decision: .invalidateAndReturn),
        Row(
            name: "401 invalid_token with the budget spent: invalidated, not replayed", recovery: get,
            answer: invalidToken, budget: false, decision: .invalidateAndReturn),
        Row(
            name: "the replay's own 401 is returned as it is", recovery: get, answer: invalidToken,
            progress: Progress(replayed: true), decision: .returnAnswer),
        Row(
            name: "a static secret is never renewed", recovery: secret, answer: invalidToken,
            decision: .returnAnswer),
        Row(
            name: "a 401 without invalid_token is returned", recovery: get, answer: Answer(status: 401),
            decision: .returnAnswer),
        Row(
            name: "a 403 is never replayed", recovery: get, answer: Answer(status: 403, insufficientScope: true),
            decision: .returnAnswer),
        Row(
            name: "DPoP: a nonce challenge is signed again, for any method", recovery: post, answer: nonce,
            decision: .signAgain),
        Row(
            name: "DPoP: a second nonce challenge is returned", recovery: post, answer: nonce,
            progress: Progress(signedAgain: true), decision: .returnAnswer),
        Row(
            name: "DPoP: the re-signed request's invalid_token replays a GET", recovery: get,
            answer: Answer(status: 401, nonceChallenge: true, invalidToken: true),
            progress: Progress(signedAgain: true), decision: .invalidateAndReplay),
        Row(
            name: "DPoP: a replay's nonce challenge is returned (its nonce kept)", recovery: get, answer: nonce,
            progress: Progress(replayed: true), decision: .returnAnswer),
        Row(
            name: "discovered: a 401 naming resource metadata resolves again, the answer returned",
            recovery: discoveredPost, answer: Answer(status: 401, resourceMetadata: hint, scopes: ["a"]),
            decision: .resolveAgain(hint: hint, scopes: ["a"], invalidate: false, replay: false)),
        Row(
            name: "discovered: invalid_token naming metadata on a POST invalidates and resolves again",
            recovery: discoveredPost, answer: Answer(status: 401, invalidToken: true, resourceMetadata: hint),
            decision: .resolveAgain(hint: hint, scopes: nil, invalidate: true, replay: false)),
        Row(
            name: "discovered: invalid_token on a GET replays first (its replay's challenge is followed)",
            recovery: discoveredGet, answer: Answer(status: 401, invalidToken: true, resourceMetadata: hint),
            decision: .invalidateAndReplay),
        Row(
            name: "discovered: 403 insufficient_scope steps up for the next request, never replays",
            recovery: discoveredGet, answer: Answer(status: 403, insufficientScope: true, scopes: ["b"]),
            decision: .stepUp(scopes: ["b"], replay: false)),
        Row(
            name: "SPEC 9.1: sent without a session, its 401 resolves and sends again with one (any method)",
            recovery: discoveredPost, answer: Answer(status: 401, credentialed: false, resourceMetadata: hint),
            decision: .resolveAgain(hint: hint, scopes: nil, invalidate: false, replay: true)),
        Row(
            name: "SPEC 9.1: a resource that answers without asking for a token is used without one",
            recovery: discoveredGet, answer: Answer(status: 200, credentialed: false), decision: .returnAnswer),
    ]

    static let forwardingRows: [Row] = [
        Row(name: "a 2xx is returned", recovery: forwarded, answer: Answer(status: 200), decision: .returnAnswer),
        Row(
            name: "401 invalid_token on a POST: invalidated and sent again", recovery: forwarded,
            answer: invalidToken, decision: .invalidateAndReplay),
        Row(
            name: "any 401 is sent again once: the server did not act", recovery: forwarded,
            answer: Answer(status: 401), decision: .invalidateAndReplay),
        Row(
            name: "the second 401 is returned", recovery: forwarded, answer: invalidToken,
            progress: Progress(replayed: true), decision: .returnAnswer),
        Row(
            name: "a static secret's 401 is returned",
            recovery: .init(
                policy: .forwarding, replayable: false, renewable: false, discovered: false),
            answer: Answer(status: 401), decision: .returnAnswer),
        Row(
            name: "DPoP: a nonce challenge is signed again", recovery: forwarded, answer: nonce,
            decision: .signAgain),
        Row(
            name: "DPoP: then its invalid_token is renewed and sent again", recovery: forwarded,
            answer: Answer(status: 401, nonceChallenge: true, invalidToken: true),
            progress: Progress(signedAgain: true), decision: .invalidateAndReplay),
        Row(
            name: "discovered: a 401 resolves again (its metadata and scope) and sends again",
            recovery: forwardedDiscovered,
            answer: Answer(status: 401, invalidToken: true, resourceMetadata: hint, scopes: ["a"]),
            decision: .resolveAgain(hint: hint, scopes: ["a"], invalidate: true, replay: true)),
        Row(
            name: "discovered: 403 insufficient_scope steps up and sends again (a login starts)",
            recovery: forwardedDiscovered, answer: Answer(status: 403, insufficientScope: true, scopes: ["b"]),
            decision: .stepUp(scopes: ["b"], replay: true)),
        Row(
            name: "discovered: a second insufficient_scope is returned", recovery: forwardedDiscovered,
            answer: Answer(status: 403, insufficientScope: true), progress: Progress(steppedUp: true),
            decision: .returnAnswer),
        Row(
            name: "configured: 403 insufficient_scope is returned", recovery: forwarded,
            answer: Answer(status: 403, insufficientScope: true), decision: .returnAnswer),
        Row(
            name: "SPEC 9.1: sent without a session, its 401 resolves and sends again",
            recovery: forwardedDiscovered, answer: Answer(status: 401, credentialed: false),
            decision: .resolveAgain(hint: nil, scopes: nil, invalidate: false, replay: true)),
        Row(
            name: "SPEC 9.1: a server that needs no authorization is used without it",
            recovery: forwardedDiscovered, answer: Answer(status: 200, credentialed: false),
            decision: .returnAnswer),
    ]

    @Test(arguments: requestRows)
    func requestPolicy(row: Row) {
        #expect(row.recovery.after(row.answer, progress: row.progress, budgetAvailable: row.budget) == row.decision)
    }

    @Test(arguments: forwardingRows)
    func forwardingPolicy(row: Row) {
        #expect(row.recovery.after(row.answer, progress: row.progress, budgetAvailable: row.budget) == row.decision)
    }

    @Test func onlyTheForwardingPolicyLogsInOrRegistersAgain() {
        for recovery in [Self.get, Self.discoveredPost] {
            #expect(
                recovery.afterRefusal(interactionRequired: true, invalidClient: false, progress: Progress()) == .fail)
            #expect(
                recovery.afterRefusal(interactionRequired: false, invalidClient: true, progress: Progress()) == .fail)
        }
        let forwarded = Self.forwardedDiscovered
        #expect(forwarded.afterRefusal(interactionRequired: true, invalidClient: false, progress: Progress()) == .logIn)
        #expect(
            forwarded.afterRefusal(interactionRequired: true, invalidClient: false, progress: Progress(loggedIn: true))
                == .fail)
        #expect(
            forwarded.afterRefusal(interactionRequired: false, invalidClient: true, progress: Progress()) == .applyAgain
        )
        #expect(
            Self.forwarded.afterRefusal(interactionRequired: false, invalidClient: true, progress: Progress()) == .fail)
    }

    @Test func aForwarded401sScopesTheSessionLacksAreAskedFor() {
        #expect(Self.forwardedDiscovered.missingScopes(challenged: ["a", "b"], held: ["a"]) == ["a", "b"])
        #expect(Self.forwardedDiscovered.missingScopes(challenged: ["a"], held: ["a", "b"]) == nil)
        #expect(Self.discoveredPost.missingScopes(challenged: ["a", "b"], held: ["a"]) == nil)
    }

    @Test func theSnapshotReadsTheChallenges() {
        let headers = HTTPHeaders([
            ("WWW-Authenticate", #"Bearer error="invalid_token", resource_metadata="\#(Self.hint)", scope="a b""#)
        ])
        #expect(
            Answer(status: 401, headers: headers, credentialed: true, nonceChallenge: false)
                == Answer(status: 401, invalidToken: true, resourceMetadata: Self.hint, scopes: ["a", "b"]))
        let scope = HTTPHeaders([("WWW-Authenticate", #"Bearer error="insufficient_scope", scope="c""#)])
        #expect(
            Answer(status: 403, headers: scope, credentialed: true, nonceChallenge: false)
                == Answer(status: 403, insufficientScope: true, scopes: ["c"]))
    }
}
