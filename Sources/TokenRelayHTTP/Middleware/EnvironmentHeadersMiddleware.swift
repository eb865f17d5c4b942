/// Adds an environment's configured headers to requests for its origins. A field the request
/// already has (same name, any case) is left as the caller set it: per-request headers win.
public struct EnvironmentHeadersMiddleware: HTTPMiddleware {
    /// The environment's headers.
    public let headers: HTTPHeaders
    /// Where they may go.
    public let origins: OriginPolicy

    public init(headers: HTTPHeaders, origins: OriginPolicy) {
        self.headers = headers
        self.origins = origins
    }

    public func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        guard !headers.fields.isEmpty, origins.allows(request) else { return try await next(request) }
        var merged = request
        for field in headers.fields where !request.headers.contains(field.name) {
            merged.headers.add(name: field.name, value: field.value)
        }
        return try await next(merged)
    }
}
