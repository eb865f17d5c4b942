import TokenRelayLogging

/// Logs each exchange on stderr, buffered requests and event-stream connections alike (a stream's
/// `http response` line comes with its head, `stream` says which): at `debug` the method, the
/// redacted URL, the status and the elapsed time; at `trace` also the header fields, with
/// credentials masked. Never bodies.
///
/// Masked: query parameters named in ``secretQueryParameters`` plus ``commonSecretParameters``,
/// URL user-info passwords, and the fields `Authorization`, `Proxy-Authorization`, `Cookie`,
/// `Set-Cookie`, `DPoP` (a proof of possession, RFC 9449) plus ``secretHeaders`` (API-key headers). Everything also passes through the
/// logger's ``Redactor``.
public struct LoggingMiddleware: HTTPMiddleware {
    /// Query parameter names (case-insensitive) masked in every logged URL.
    public static let commonSecretParameters: Set<String> = [
        "access_token", "refresh_token", "id_token", "api_key", "apikey", "key", "token", "client_secret",
        "password", "code", "sig", "signature",
    ]
    /// Header names always masked.
    public static let credentialHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "dpop",
    ]

    /// Query parameter names masked, lower case: ``commonSecretParameters`` and the profiles'.
    public let secretQueryParameters: Set<String>
    /// Header names masked, lower case: ``credentialHeaders`` and the profiles' (API-key headers).
    public let secretHeaders: Set<String>
    let logger: Logger

    public init(secretQueryParameters: [String] = [], secretHeaders: [String] = [], logger: Logger = .shared) {
        // The shared sets as they are when nothing is added (most environments): no copy.
        self.secretQueryParameters =
            secretQueryParameters.isEmpty
            ? Self.commonSecretParameters
            : Self.commonSecretParameters.union(secretQueryParameters.map { $0.lowercased() })
        self.secretHeaders =
            secretHeaders.isEmpty
            ? Self.credentialHeaders : Self.credentialHeaders.union(secretHeaders.map { $0.lowercased() })
        self.logger = logger
    }

    public func intercept(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        guard logger.isEnabled(.debug) else { return try await next(request) }
        return try await logged(request, next: next)
    }

    /// The exchange with its lines. Apart from ``intercept(_:next:)``, so that a request sent
    /// below `debug` does not carry this frame (an async function's frame is sized for its
    /// longest path).
    private func logged(
        _ request: HTTPRequest, next: @Sendable (HTTPRequest) async throws -> HTTPStreamingResponse
    ) async throws -> HTTPStreamingResponse {
        let url = redactedURL(request.url)
        let tracing = logger.isEnabled(.trace)
        let stream = request.delivery == .buffered ? "no" : "yes"
        logger.debug("http request", [("method", request.method), ("url", url), ("stream", stream)])
        if tracing { logger.trace("http request headers", redactedFields(request.headers)) }
        let start = ContinuousClock.now
        do {
            let response = try await next(request)
            let elapsed = Self.milliseconds(ContinuousClock.now - start)
            logger.debug(
                "http response",
                [
                    ("method", request.method), ("url", url), ("stream", stream), ("status", String(response.status)),
                    ("elapsedMs", elapsed),
                ])
            if tracing { logger.trace("http response headers", redactedFields(response.headers)) }
            return response
        } catch {
            let elapsed = Self.milliseconds(ContinuousClock.now - start)
            logger.debug(
                "http failure",
                [
                    ("method", request.method), ("url", url), ("stream", stream), ("error", String(describing: error)),
                    ("elapsedMs", elapsed),
                ])
            throw error
        }
    }

    /// `url` with secret query values and any user-info password replaced by `[REDACTED]`.
    public func redactedURL(_ url: String) -> String {
        var text = Substring(url)
        if let hash = text.firstIndex(of: "#") { text = text[..<hash] }
        var base = text
        var query: Substring?
        if let question = text.firstIndex(of: "?") {
            base = text[..<question]
            query = text[text.index(after: question)...]
        }
        var result = Self.redactUserInfo(base)
        if let query {
            let parts = query.split(separator: "&", omittingEmptySubsequences: false).map { part -> String in
                guard let equals = part.firstIndex(of: "=") else { return String(part) }
                let name = PercentEncoding.decode(part[..<equals], plusIsSpace: true).lowercased()
                return secretQueryParameters.contains(name) ? part[..<equals] + "=" + Redactor.mask : String(part)
            }
            result += "?" + parts.joined(separator: "&")
        }
        return result  // the fragment never leaves the client: not logged
    }

    /// Header fields for a trace line, credentials masked; a response's fields are the server's
    /// text (a challenge may echo anything), so every name and value is cleaned and bounded
    /// like any server text (``ServerText``).
    public func redactedFields(_ headers: HTTPHeaders) -> [(String, String)] {
        headers.fields.map { field in
            (
                ServerText(field.name).value,
                secretHeaders.contains(field.name.lowercased()) ? Redactor.mask : ServerText(field.value).value
            )
        }
    }

    private static func redactUserInfo(_ base: Substring) -> String {
        guard let schemeEnd = base.firstRange(of: "://") else { return String(base) }
        let authorityStart = schemeEnd.upperBound
        let authorityEnd = base[authorityStart...].firstIndex(of: "/") ?? base.endIndex
        guard let at = base[authorityStart..<authorityEnd].lastIndex(of: "@") else { return String(base) }
        let userInfo = base[authorityStart..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? userInfo
        return base[..<authorityStart] + user + ":" + Redactor.mask + base[at...]
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
