import TokenRelayHTTP

/// Identifies which credential a request was sent with (for example a token's version), so a
/// 401 can invalidate that credential only if it is still the current one.
public struct CredentialStamp: Sendable, Hashable {
    public let value: UInt64
    public init(_ value: UInt64) { self.value = value }
}

/// The seam between the middleware stack and whatever holds credentials (static secrets, the
/// token manager). ``CredentialsMiddleware`` calls it; the transport knows nothing of tokens.
public protocol CredentialSource: Sendable {
    /// Attaches credentials to `request` (a header or a query parameter) and returns which
    /// credential was used. Throws when no credential can be had (e.g. token acquisition refused).
    /// Must honour task cancellation (cancelling a subscription cancels a pending acquisition).
    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp

    /// Whether a 401 may be recovered from by renewing this credential (OAuth tokens: yes;
    /// static secrets: no — renewing would not change them).
    var isRenewable: Bool { get }

    /// A request signed with `stamp` was rejected with `401 invalid_token`. Drops that credential
    /// only if it is still the current one, so that many concurrent 401s cause one renewal.
    /// Throws when renewal is not allowed (for example excessive renewals).
    func invalidate(stamp: CredentialStamp) async throws

    /// Looks at the response to `request`, which this source signed: keeps what the server asks
    /// the next signature to carry (a DPoP nonce, RFC 9449 §8–9) and says whether `request` must be
    /// signed again and sent once more because of it (a `use_dpop_nonce` challenge: the server
    /// did not act on the request, so any method may be sent again).
    func signsAgain(after status: Int, headers: HTTPHeaders, request: HTTPRequest) -> Bool

    /// Whether a request goes out without a credential first, its 401 resolving the session
    /// (SPEC §9.1: a discovered profile with no session yet; a resource that answers without
    /// asking for a token is used without one).
    var awaitsChallenge: Bool { get async }
}

extension CredentialSource {
    /// Most credentials carry nothing a server asks for: never signed again.
    public func signsAgain(after status: Int, headers: HTTPHeaders, request: HTTPRequest) -> Bool { false }

    /// Most credentials are had without asking the resource first.
    public var awaitsChallenge: Bool { get async { false } }
}
