import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// `request`: one HTTP request to an environment, with the profile's credentials.
package struct RequestMethod: Sendable {
    let runtime: RelayRuntime

    package init(runtime: RelayRuntime) { self.runtime = runtime }

    /// Sends the request the params describe; any HTTP status is a response.
    package func perform(_ params: RequestParams) async throws -> (HTTPResponse, Duration) {
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
        let response: HTTPResponse
        do {
            response = try await client.send(collecting: request)
        } catch HTTPError.invalidURL(let reason) {
            // libcurl refused the URL at the transfer: the member it came from says where.
            throw RPCError.invalidParams([ParamDiagnostic(pointer: params.target.pointer, reason: reason)])
        }
        return (response, ContinuousClock.now - start)
    }

    /// The HTTP request the params describe (URL built, query appended, body typed).
    static func httpRequest(_ params: RequestParams, environment: EnvironmentRuntime) throws -> HTTPRequest {
        var url: String
        switch params.target {
        case .url(let absolute):
            url = absolute
        case .path(let template, let variables):
            let expanded = try expandedPath(template, variables: variables)
            url = RequestURL.join(base: environment.settings.baseURL, path: expanded)
        }
        if !params.query.isEmpty {
            url = RequestURL.appendingQuery(params.query.map { ($0.name, $0.value) }, to: url)
        }
        // libcurl's parse decides, once: the origin checks downstream and the transfer use it.
        let parsed = try parsedURL(url, params: params, environment: environment)
        var headers = params.headers
        if let body = params.body, let contentType = body.defaultContentType, !headers.contains("content-type") {
            headers.add(name: "Content-Type", value: contentType)
        }
        var request = HTTPRequest(
            method: params.method, parsedURL: parsed, headers: headers, body: params.body?.bytes,
            connectTimeout: environment.settings.connectTimeout)
        request.decodesContent = params.decodesContent
        return request
    }

    /// The path `template` gives with `variables` (RFC 6570), or -32602 at `/path`.
    static func expandedPath(_ template: String, variables: [String: JSONValue]) throws(RPCError) -> String {
        do {
            return try URITemplate.expand(template, variables: variables.compactMapValues(Self.templateValue))
        } catch {
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "/path", reason: "\(error)")])
        }
    }

    /// `url` as libcurl parses it, or -32602 at the member it came from (a `base_url` libcurl
    /// refuses is the configuration's fault: kind `config`).
    static func parsedURL(_ url: String, params: RequestParams, environment: EnvironmentRuntime) throws
        -> ParsedURL
    {
        do {
            return try environment.recentURLs.parse(url)
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

extension RequestMethod: RelayMethod {
    static let method = "request"
    /// On the transfer loop of the environment it names (ARCHITECTURE.md, "Where code runs").
    static let place = MethodPlacement.Place.transfer(environmentAt: ["environment"])

    static func decode(_ params: JSONValue?, context: RequestContext) throws -> RequestParams {
        try RequestParams.decode(params)
    }

    /// `{status, headers, json | text | base64, elapsedMs}` (SPEC §4.3): any HTTP status is a result.
    struct Result: MethodResult, Equatable {
        /// The body as it goes on the wire, and the member it goes in.
        enum Body: Equatable, Sendable {
            /// `json`: the body's own JSON, compacted (`application/json`, `+json`).
            case json(JSONText)
            /// `text`: other UTF-8 text.
            case text(String)
            /// `base64`: anything else, base64-encoded.
            case base64(String)

            /// The member's name.
            var member: String {
                switch self {
                case .json: "json"
                case .text: "text"
                case .base64: "base64"
                }
            }

            var value: JSONValue {
                switch self {
                case .json(let text): text.value
                case .text(let text), .base64(let text): .string(text)
                }
            }

            func write(into output: inout [UInt8]) {
                switch self {
                case .json(let text): text.write(into: &output)
                case .text(let text), .base64(let text): JSONValue.writeString(text, into: &output)
                }
            }
        }

        /// The HTTP status (any status is a result).
        var status: Int
        /// Lower-case names; repeated fields joined with ", "; `set-cookie` an array.
        var headers: JSONObject
        /// `nil` for an empty body.
        var body: Body?
        /// From sending to the collected response, token acquisition included.
        var elapsed: Duration

        /// `elapsed` in milliseconds, rounded to the microsecond.
        var elapsedMilliseconds: JSONNumber {
            let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            return JSONNumber((milliseconds * 1000).rounded() / 1000)
        }

        var resultValue: JSONValue {
            var result: JSONObject = ["status": .int(status), "headers": .object(headers)]
            if let body { result[body.member] = body.value }
            result["elapsedMs"] = .number(elapsedMilliseconds)
            return .object(result)
        }

        /// The text of ``resultValue``, written without building it: the body's JSON goes in as
        /// the compacted bytes it already is.
        func write(into output: inout [UInt8]) {
            output.append(contentsOf: #"{"status":"#.utf8)
            output.append(contentsOf: String(status).utf8)
            output.append(contentsOf: #","headers":"#.utf8)
            JSONValue.object(headers).write(into: &output)
            if let body {
                output.append(contentsOf: #",""#.utf8)
                output.append(contentsOf: body.member.utf8)
                output.append(contentsOf: #"":"#.utf8)
                body.write(into: &output)
            }
            output.append(contentsOf: #","elapsedMs":"#.utf8)
            output.append(contentsOf: elapsedMilliseconds.literal.utf8)
            output.append(UInt8(ascii: "}"))
        }

        /// The result's schema in the OpenRPC document.
        static let schema = Schema.object(
            [
                "status": Schema.integer,
                "headers": [
                    "type": "object",
                    "description": "Lower-case names; repeated fields joined with ', '; set-cookie an array.",
                    "additionalProperties": ["oneOf": [Schema.string, ["type": "array", "items": Schema.string]]],
                ],
                "json": ["description": "Parsed body for application/json and +json types."],
                "text": Schema.string("Other UTF-8 text bodies."),
                "base64": Schema.string("Anything else."),
                "elapsedMs": ["type": "number"],
            ], required: ["status", "headers", "elapsedMs"])
    }

    static func handle(_ params: RequestParams, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { runtime in
            let (response, elapsed) = try await RequestMethod(runtime: runtime).perform(params)
            return ResponseEncoding.result(response, elapsed: elapsed)
        }
    }

    static let openRPC = MethodDescription(
        name: method,
        summary:
            "Sends an HTTP request to an environment with the profile's credentials attached. Any HTTP status is a result.",
        params: SharedParams.session + SharedParams.target + SharedParams.body + SharedParams.tail,
        result: Result.schema,
        errors: MethodDescription.requestErrors)
}

/// Human-readable durations for messages.
public enum DurationText {
    public static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
