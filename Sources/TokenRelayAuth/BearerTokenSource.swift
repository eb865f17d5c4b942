/// A credential source that can hand out its bearer token as it is (`bearer` profiles), for
/// credential-helper mode with `expose_token: true`.
public protocol BearerTokenSource: Sendable {
    /// The bearer token, cached or fetched as for a request; `nil` when the source holds
    /// another kind of credential (an API key, Basic).
    func bearerToken() async throws -> String?
}
