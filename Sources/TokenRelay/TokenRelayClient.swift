import FoundationEssentials
import TokenRelayConfig
import TokenRelayJSONRPC
@_spi(TokenRelay) import TokenRelayServer

/// Authenticated HTTP for a Swift program: the sessions tokenrelay holds (API keys, OAuth 2.0
/// tokens renewed before they expire, interactive logins kept in the session store), in process.
///
/// Build one from a config file (``load(configFile:environment:)``), from YAML text
/// (``load(yaml:environment:variables:)``) or from code (``make(_:)``); make requests with
/// ``request(_:_:headers:query:body:environment:profile:timeout:)``; ``close()`` it when done.
/// One client may be used from many tasks at once: concurrent requests share one token renewal.
public final class TokenRelayClient: Sendable {
    private let session: RelaySession

    private init(session: RelaySession) {
        self.session = session
    }

    /// A client for a config file, read exactly as the `tokenrelay` command reads it.
    /// - Parameters:
    ///   - configFile: The file (default: `$TOKENRELAY_CONFIG`, else `~/.config/tokenrelay/config.yaml`).
    ///   - environment: Overrides the config's `default_environment`.
    public static func load(configFile: String? = nil, environment: String? = nil) async throws(TokenRelayError)
        -> TokenRelayClient
    {
        let result = await ConfigLoader().load(
            path: configFile, environment: ProcessEnvironment.current(), mode: .serve)
        return try await open(result, environment: environment)
    }

    /// A client for a configuration given as YAML (or JSON) text.
    /// - Parameters:
    ///   - yaml: The configuration.
    ///   - environment: Overrides the config's `default_environment`.
    ///   - variables: What `${VAR}` and `{env: NAME}` read (default: the process environment).
    public static func load(
        yaml: String, environment: String? = nil, variables: [String: String] = ProcessEnvironment.current()
    ) async throws(TokenRelayError) -> TokenRelayClient {
        let result = await ConfigLoader().decode(yaml: yaml, environment: variables, mode: .serve)
        return try await open(result, environment: environment)
    }

    /// A client for a configuration built in code. It is checked exactly as a config file is.
    public static func make(_ configuration: TokenRelayConfiguration) async throws(TokenRelayError)
        -> TokenRelayClient
    {
        try await load(yaml: configuration.jsonText, variables: ProcessEnvironment.current())
    }

    private static func open(_ result: ConfigLoadResult, environment: String?) async throws(TokenRelayError)
        -> TokenRelayClient
    {
        guard !result.hasErrors, let settings = result.settings else {
            throw TokenRelayError(
                kind: "config", message: result.errors.map(\.renderedWithSeverity).joined(separator: "\n"))
        }
        do {
            return TokenRelayClient(session: try await RelaySession.open(settings: settings, environment: environment))
        } catch {
            throw TokenRelayError(error)
        }
    }

    /// Sends one request with the profile's credentials and returns the response (any status is
    /// a response; an error is thrown only when there is none).
    /// - Parameters:
    ///   - method: The HTTP method (`GET`, `POST`, ...).
    ///   - path: A path relative to the environment's `base_url`, or an absolute URL
    ///     (credentials go only to the environment's origin and its `allowed_origins`).
    ///   - headers: Header fields to send (they win over the environment's `headers`).
    ///   - query: Query parameters to add.
    ///   - body: The request body, if any.
    ///   - environment: The environment (default: the configured default).
    ///   - profile: The profile (default: the environment's default).
    ///   - timeout: The request's deadline, token included (default: the environment's `timeout`).
    /// - Returns: The response, whatever its status.
    public func request(
        _ method: String = "GET", _ path: String, headers: [String: String] = [:], query: [String: String] = [:],
        body: [UInt8]? = nil, environment: String? = nil, profile: String? = nil, timeout: Duration? = nil
    ) async throws(TokenRelayError) -> TokenRelayResponse {
        var params = JSONObject()
        params["method"] = .string(method)
        let lower = path.lowercased()
        params[lower.hasPrefix("http://") || lower.hasPrefix("https://") ? "url" : "path"] = .string(path)
        if !headers.isEmpty {
            params["headers"] = .object(
                JSONObject(headers.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
        }
        if !query.isEmpty {
            params["query"] = .object(JSONObject(query.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
        }
        if let body { params["base64"] = .string(Data(body).base64EncodedString()) }
        if let environment { params["environment"] = .string(environment) }
        if let profile { params["profile"] = .string(profile) }
        if let timeout {
            params["timeoutMs"] = .int(
                Int(timeout.components.seconds) * 1000 + Int(timeout.components.attoseconds / 1_000_000_000_000_000))
        }
        do {
            let response = try await session.request(.object(params))
            return TokenRelayResponse(
                status: response.status, headers: response.headers.fields.map { ($0.name, $0.value) },
                body: response.body)
        } catch {
            throw TokenRelayError(error)
        }
    }

    /// The access token of a profile that sets `expose_token: true`. Prefer
    /// ``request(_:_:headers:query:body:environment:profile:timeout:)``, which never hands the token out.
    /// - Parameters:
    ///   - environment: The environment (default: the configured default).
    ///   - profile: The profile (default: the environment's default).
    ///   - minimumValidity: Renew first unless the token stays valid this long (default 60 s).
    public func token(environment: String? = nil, profile: String? = nil, minimumValidity: Duration? = nil)
        async throws(TokenRelayError) -> TokenRelayAccessToken
    {
        do {
            let token = try await session.token(
                environment: environment, profile: profile, minimumValidity: minimumValidity)
            return TokenRelayAccessToken(value: token.accessToken, type: token.tokenType, expiresAt: token.expiresAt)
        } catch {
            throw TokenRelayError(error)
        }
    }

    /// Logs in to an interactive profile (authorization code with PKCE, or device code) and
    /// stores the session.
    /// - Parameters:
    ///   - environment: The environment (default: the configured default).
    ///   - profile: The profile (default: the environment's default).
    ///   - openBrowser: Also open the URL, when the profile's `open_browser` allows it.
    ///   - onPrompt: Gets what a person must do: the URL to open, and the code to enter for a
    ///     device login.
    public func login(
        environment: String? = nil, profile: String? = nil, openBrowser: Bool = true,
        onPrompt: @escaping @Sendable (TokenRelayLoginPrompt) -> Void
    ) async throws(TokenRelayError) {
        do {
            _ = try await session.login(environment: environment, profile: profile, openBrowser: openBrowser) {
                onPrompt(
                    TokenRelayLoginPrompt(
                        url: $0["url"]?.stringValue ?? "", userCode: $0["userCode"]?.stringValue))
            }
        } catch {
            throw TokenRelayError(error)
        }
    }

    /// Ends the client: closes its transfers and its session store. Call it before the client
    /// is dropped; requests after it fail.
    public func close() async {
        await session.close()
    }
}
