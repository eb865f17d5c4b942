import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

/// Attaches OAuth access tokens from a ``TokenManager`` session as `Authorization: Bearer`.
public struct TokenCredentialSource: CredentialSource {
    /// The manager holding the session.
    public let manager: TokenManager
    /// The session.
    public let key: SessionKey
    private let clock: any AuthClock

    /// A source for session `key` of `manager`; `clock` turns request timeouts into deadlines.
    public init(manager: TokenManager, key: SessionKey, clock: any AuthClock = SystemAuthClock()) {
        self.manager = manager
        self.key = key
        self.clock = clock
    }

    /// Gets a token (bounded by `request.timeout`, honouring the task's cancellation), sets the
    /// `Authorization` header and returns the token's version as the stamp.
    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let deadline = request.effectiveTimeout(now: .now).map { clock.now.addingTimeInterval($0.timeInterval) }
        let token = try await manager.token(for: key, deadline: deadline)
        // RFC 8693 §2.2.1: `N_A` is not an access token (an ID-JAG is an assertion for the
        // authorization server that asked for it, SPEC §9.9): never sent to an API.
        guard token.tokenType != "N_A" else {
            throw AuthError.configuration(
                "the token of \(key) is not an access token (token_type N_A): it is an assertion, for a jwt_bearer "
                    + "profile's 'assertion: { profile: \(key.profile) }'")
        }
        // In use: kept among the redactor's recent tokens (registered again if it was dropped).
        Redactor.shared.registerToken(token.accessToken)
        if token.certificateBound {
            // RFC 8705 §3: a certificate-bound token goes with the certificate it is bound to.
            request.clientIdentity = try await manager.clientIdentity(for: self.key)
        }
        if let key = token.dpopKey {
            // RFC 9449 §7: the DPoP scheme and a proof naming the method, URL and token.
            let url: ParsedURL
            do {
                url = try request.targetURL()
            } catch {
                throw HTTPError.invalidURL("\(error)")
            }
            let proof = try key.proof(
                method: request.method, url: url, accessToken: token.accessToken,
                nonce: manager.dpopNonces.nonce(for: url), now: clock.now)
            request.headers.set(name: "Authorization", value: "DPoP \(token.accessToken)")
            request.headers.set(name: "DPoP", value: proof)
        } else {
            // A bound token is never sent as a bearer one (fail closed: the server would take it).
            guard token.tokenType.lowercased() != "dpop" else {
                throw AuthError.configuration("the DPoP key of \(key) is not available; log out of the session")
            }
            request.headers.set(name: "Authorization", value: "Bearer \(token.accessToken)")
        }
        return CredentialStamp(token.version)
    }

    /// A DPoP-signed request: the server's nonce is kept for the next proofs to its origin, and a
    /// `use_dpop_nonce` challenge that brought one gets the request signed and sent once more.
    public func signsAgain(after status: Int, headers: HTTPHeaders, request: HTTPRequest) -> Bool {
        // Every response of every request asks: a bearer session answers from the key alone.
        guard key.mayHoldBoundTokens, request.headers["Authorization"]?.hasPrefix("DPoP ") == true,
            let url = try? request.targetURL()
        else {
            return false
        }
        let gaveNonce = manager.dpopNonces.remember(headers, from: url)
        return gaveNonce && DPoPNonces.isNonceChallenge(status: status, headers: headers)
    }

    /// OAuth tokens may be renewed after a 401.
    public var isRenewable: Bool { true }

    /// Invalidates the token of version `stamp` if it is still current; throws when renewals are
    /// paused as excessive.
    public func invalidate(stamp: CredentialStamp) async throws {
        try await manager.invalidate(key, stamp: stamp)
    }
}
