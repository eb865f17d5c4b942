import Config
import HTTP
import JSONRPC
import Logging

/// `request`: one HTTP request to an environment, with the profile's credentials.
struct RequestMethod: Sendable {
    let runtime: RelayRuntime

    func handle(_ params: JSONValue?) async throws -> JSONValue {
        let (response, elapsed) = try await perform(try RequestParams.decode(params))
        return ResponseEncoding.result(response, elapsed: elapsed)
    }

    /// Sends the request the params describe; any HTTP status is a response.
    func perform(_ params: RequestParams) async throws -> (HTTPResponse, Duration) {
        let environment = try runtime.environment(params.environment)
        let profile = params.auth ? try runtime.profile(params.profile, in: environment) : nil
        var request = try Self.httpRequest(params, environment: environment)
        try profile?.checkCanSign(request.headers)
        let client = environment.client(for: profile)
        let timeout = params.timeout ?? environment.settings.timeout
        let start = ContinuousClock.now
        // One deadline bounds the whole request: token acquisition, the transfer and a replay
        // each get only the time left (libcurl enforces it on the transfer; no timer task).
        request.timeout = timeout
        request.deadline = start + timeout
        let response = try await client.send(collecting: request)
        return (response, ContinuousClock.now - start)
    }

    /// The HTTP request the params describe (URL built, query appended, body typed).
    static func httpRequest(_ params: RequestParams, environment: EnvironmentRuntime) throws -> HTTPRequest {
        var url: String
        switch params.target {
        case .url(let absolute):
            url = absolute
        case .path(let template, let variables):
            let expanded: String
            do {
                expanded = try URITemplate.expand(template, variables: variables.compactMapValues(Self.templateValue))
            } catch {
                throw RPCError.invalidParams([ParamDiagnostic(pointer: "/path", reason: "\(error)")])
            }
            url = RequestURL.join(base: environment.settings.baseURL, path: expanded)
        }
        if !params.query.isEmpty {
            url = RequestURL.appendingQuery(params.query.map { ($0.name, $0.value) }, to: url)
        }
        // libcurl's parse decides: the origin checks downstream and the transfer see its text.
        url = try parsedURL(url, params: params, environment: environment).text
        var headers = params.headers
        if let body = params.body, let contentType = body.defaultContentType, !headers.contains("content-type") {
            headers.add(name: "Content-Type", value: contentType)
        }
        return HTTPRequest(
            method: params.method, url: url, headers: headers, body: params.body?.bytes,
            connectTimeout: environment.settings.connectTimeout)
    }

    /// `url` as libcurl parses it, or -32602 at the member it came from (a `base_url` libcurl
    /// refuses is the configuration's fault: kind `config`).
    static func parsedURL(_ url: String, params: RequestParams, environment: EnvironmentRuntime) throws
        -> ParsedURL
    {
        do {
            return try ParsedURL(url)
        } catch {
            if case .path = params.target {
                do {
                    _ = try ParsedURL(environment.settings.baseURL)
                } catch let baseProblem {
                    throw RPCError(
                        code: .config, message: "the base_url of environment '\(environment.name)' \(baseProblem)")
                }
                throw RPCError.invalidParams([
                    ParamDiagnostic(pointer: "/path", reason: "gives a URL that \(error)")
                ])
            }
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "/url", reason: error.description)])
        }
    }

    /// A template variable; `null` is undefined (the expression expands to nothing).
    static func templateValue(_ value: JSONValue) -> URITemplateValue? {
        switch value {
        case .array(let items): .list(items.compactMap(RequestParams.scalarText))
        case .object(let members):
            .associative(members.compactMap { m in RequestParams.scalarText(m.value).map { (m.key, $0) } })
        case .null: nil
        default: .string(RequestParams.scalarText(value) ?? "")
        }
    }
}

/// Human-readable durations for messages.
public enum DurationText {
    public static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
