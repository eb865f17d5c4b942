import FoundationEssentials
import Synchronization
import TokenRelayHTTP
import TokenRelayLogging

/// Credentials that do not change: an API key (header or query), HTTP Basic, or a static bearer
/// token. The secret is resolved on first use and kept; `invalidate` does nothing and 401s are
/// not recovered (renewing would not change the secret).
public final class StaticCredentialSource: CredentialSource, BearerTokenSource {
    /// Where an API key goes.
    public enum Placement: Sendable {
        /// In the named header.
        case header(String)
        /// As the named query parameter (percent-encoded, appended to the URL).
        case query(String)
    }

    /// The kind of credential.
    public enum Credential: Sendable {
        /// `api_key`.
        case apiKey(Placement, SecretProvider)
        /// `basic`: `Authorization: Basic base64(username:password)` (RFC 7617).
        case basic(username: String, password: SecretProvider)
        /// `bearer` with a static token: `Authorization: Bearer <token>`.
        case bearer(SecretProvider)
    }

    private let credential: Credential
    /// Guarded by the mutex: the resolved secret, once known.
    private let resolved = Mutex<String?>(nil)

    /// Creates a source for `credential`.
    public init(_ credential: Credential) {
        self.credential = credential
    }

    /// Attaches the credential; always stamp 0.
    public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        switch credential {
        case .apiKey(.header(let name), let provider):
            request.headers.set(name: name, value: try await secret(provider))
        case .apiKey(.query(let name), let provider):
            request.url = Self.appendingQuery(name: name, value: try await secret(provider), to: request.url)
        case .basic(let username, let provider):
            let encoded = Data("\(username):\(try await secret(provider))".utf8).base64EncodedString()
            Redactor.shared.registerToken(encoded)
            request.headers.set(name: "Authorization", value: "Basic \(encoded)")
        case .bearer(let provider):
            request.headers.set(name: "Authorization", value: "Bearer \(try await secret(provider))")
        }
        return CredentialStamp(0)
    }

    /// The token of a static `bearer` credential; `nil` for API keys and Basic.
    public func bearerToken() async throws -> String? {
        guard case .bearer(let provider) = credential else { return nil }
        return try await secret(provider)
    }

    /// Static secrets cannot be renewed.
    public var isRenewable: Bool { false }

    /// Nothing to drop.
    public func invalidate(stamp: CredentialStamp) async throws {}

    private func secret(_ provider: SecretProvider) async throws -> String {
        if let value = resolved.withLock({ $0 }) { return value }
        let value = try await provider.resolve("the credential's secret")
        // Kept for the life of this source, so masked for the life of the process (a file or
        // command secret is registered by `resolve` only among the recent tokens, which a
        // stream of issued tokens could push out while this one is still being sent).
        Redactor.shared.register(value)
        resolved.withLock { $0 = value }
        return value
    }

    /// `url` with `name=value` (both percent-encoded) added to its query, before any fragment.
    static func appendingQuery(name: String, value: String, to url: String) -> String {
        Redactor.shared.registerToken(value)
        return RequestURL.appendingQuery([(name, value)], to: url)
    }
}
