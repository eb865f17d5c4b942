import FoundationEssentials
import TokenRelayHTTP
import TokenRelayLogging

/// Attaches tokens of a `discover: true` profile (SPEC §9): the session is resolved from the
/// resource on first use, again after a refused token request, and from a 401's
/// `resource_metadata` when it names another document.
public struct DiscoveredCredentialSource: CredentialSource {
    /// The resolver of the profile.
    public let authorization: ResourceAuthorization
    private let clock: any AuthClock

    /// A source resolving through `authorization`.
    public init(authorization: ResourceAuthorization, clock: any AuthClock = SystemAuthClock()) {
        self.authorization = authorization
        self.clock = clock
    }

    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let key = try await authorization.key()
        let deadline = request.effectiveTimeout(now: .now).map { clock.now.addingTimeInterval($0.timeInterval) }
        let token: Token
        do {
            token = try await authorization.manager.token(for: key, deadline: deadline)
        } catch let error as AuthError {
            if error.oauthError != nil { await authorization.tokenRequestRefused(error) }
            throw error
        }
        Redactor.shared.registerToken(token.accessToken)
        request.headers.set(name: "Authorization", value: "Bearer \(token.accessToken)")
        return CredentialStamp(token.version)
    }

    public var isRenewable: Bool { true }

    /// No session resolved yet: the resource's own answer starts discovery (SPEC §9.1).
    public var awaitsChallenge: Bool { get async { await authorization.currentKey == nil } }

    public func invalidate(stamp: CredentialStamp) async throws {
        guard let key = await authorization.currentKey else { return }
        try await authorization.manager.invalidate(key, stamp: stamp)
    }
}
