import FoundationEssentials
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayHTTPFields
import TokenRelayJSONRPC
import TokenRelayLogging

/// One `http_request` tool call (SPEC §8): the agent's arguments checked against what is
/// exposed and the rules, then sent through `request`'s own path (``RequestMethod``), and the
/// response handed back redacted and bounded. A call that is refused sends nothing.
struct HTTPRequestTool {
    let face: MCPFace
    let era: MCPProtocol.Era
    /// The `tools/call` params (a stateless client's retry carries `inputResponses` and
    /// `requestState` here).
    let params: JSONValue?
    /// The call's number in this process (audit lines).
    let number: Int
    /// The `tools/call` request's context (a wait for the person's consent leaves its slot).
    let context: RequestContext

    static let members: Set<String> = [
        "environment", "profile", "method", "path", "pathParams", "query", "headers", "json", "text",
    ]

    /// A refusal: the agent gets it as an `isError` result; nothing was sent.
    struct Refusal: Error {
        var message: String
        var rule: String = "-"
    }

    /// What the audit line says about a call.
    private struct Audit {
        var environment = "ENV"
        var profile = "PROFILE"
        var method = "-"
        var url = "-"
        var rule = "-"
        var outcome = "-"
    }

    func run(_ arguments: JSONObject) async -> MCPToolOutcome {
        let start = ContinuousClock.now
        var audit = Audit()
        let outcome: MCPToolOutcome
        do {
            outcome = try await face.server.runtimes.use { runtime in
                try await call(arguments, runtime: runtime, audit: &audit)
            }
            face.count { audit.outcome.hasPrefix("awaiting") ? ($0.awaiting += 1) : ($0.sent += 1) }
        } catch let refusal as Refusal {
            if audit.outcome == "-" { audit.outcome = "refused" }
            if audit.rule == "-" { audit.rule = refusal.rule }
            outcome = .failure(refusal.message)
            face.count { audit.outcome == "refused" ? ($0.refused += 1) : ($0.failed += 1) }
        } catch {
            let failure = ErrorMapping.rpcError(error)
            audit.outcome = failure.kind.rawValue
            outcome = .failure(Self.failureText(failure, environment: audit.environment, profile: audit.profile))
            face.count { $0.failed += 1 }
        }
        let elapsed = ContinuousClock.now - start
        log.info(
            "mcp: call #\(number) http_request \(audit.method) \(audit.url) rule=\(audit.rule) -> \(audit.outcome) "
                + "in \(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000) ms")
        return outcome
    }

    // MARK: - The call

    /// What an agent's call is aimed at: an exposed environment, maybe a profile, its rules.
    private struct Target {
        let name: String
        let exposed: MCPExposure.Environment
        let profile: MCPExposure.Profile?
        let rules: MCPSettings
        let profileRuntime: ProfileRuntime?
        var scope: String { "environment '\(name)'" + (profile.map { ", profile '\($0.name)'" } ?? "") }
    }

    /// The call, in four steps: what it is aimed at, the request it makes, the rules' decision
    /// (and the person's, when a rule asks), and the sending (a login when the session needs one).
    private func call(_ arguments: JSONObject, runtime: RelayRuntime, audit: inout Audit) async throws
        -> MCPToolOutcome
    {
        let target = try aim(arguments, runtime: runtime, audit: &audit)
        let (request, path) = try requestParams(arguments, target: target, audit: &audit)
        if let pending = try await decide(request, path: path, target: target, audit: &audit) { return pending }
        let response: HTTPResponse
        let elapsed: Duration
        switch try await send(request, target: target, runtime: runtime, audit: &audit) {
        case .answered(let answer, let time): (response, elapsed) = (answer, time)
        case .asked(let outcome): return outcome
        }
        if let coding = Self.undecodedCoding(response.headers) {
            audit.outcome = "refused answer"
            throw Refusal(
                message:
                    "the API answered HTTP \(response.status) with a body coded as '\(ServerText(coding, maximumBytes: 64).value)', which tokenrelay could not decode, so could not mask secrets in; the answer was withheld"
            )
        }
        audit.outcome = "\(response.status)"
        return Self.encode(response, limit: target.exposed.maxResponseBytes(for: target.profile), elapsed: elapsed)
    }

    /// The arguments' names and types, the exposed environment and profile they name, and its rules.
    private func aim(_ arguments: JSONObject, runtime: RelayRuntime, audit: inout Audit) throws -> Target {
        for key in arguments.keys where !Self.members.contains(key) {
            if key == "url" {
                throw Refusal(
                    message:
                        "refused: absolute URLs are not allowed; give 'path', relative to the environment's base URL")
            }
            throw Refusal(
                message:
                    "unknown argument '\(key.prefix(64))'; allowed: \(Self.members.sorted().joined(separator: ", "))")
        }
        for key in ["environment", "profile", "method", "path"] {
            if let value = arguments[key], value.stringValue == nil {
                throw Refusal(message: "invalid arguments: '\(key)' must be a string, not \(value.typeName)")
            }
        }
        let exposure = runtime.mcpExposure
        let exposedNames = exposure.environments.map(\.name).joined(separator: ", ")
        guard let environmentName = arguments["environment"]?.stringValue ?? exposure.defaultEnvironment else {
            throw Refusal(
                message: exposure.environments.isEmpty
                    ? "refused: nothing is exposed to agents (the configuration has no mcp: block)"
                    : "name an environment: one of \(exposedNames)")
        }
        guard let exposed = exposure.environment(named: environmentName) else {
            throw Refusal(
                message:
                    "refused: environment '\(environmentName.prefix(64))' is not exposed to agents (it has no mcp: block); exposed: \(exposedNames.isEmpty ? "none" : exposedNames)"
            )
        }
        var profile: MCPExposure.Profile?
        if let name = arguments["profile"]?.stringValue ?? exposed.defaultProfile {
            guard let found = exposed.profile(named: name) else {
                throw Refusal(
                    message:
                        "refused: profile '\(name.prefix(64))' of environment '\(environmentName)' is not exposed to agents; exposed: \(exposed.profiles.map(\.name).joined(separator: ", "))"
                )
            }
            profile = found
        } else if !exposed.profiles.isEmpty {
            throw Refusal(
                message:
                    "name a profile of environment '\(environmentName)': one of \(exposed.profiles.map(\.name).joined(separator: ", "))"
            )
        }
        guard let rules = exposed.rules(for: profile) else {
            throw Refusal(message: "refused: environment '\(environmentName)' exposes no rules")
        }
        audit.environment = environmentName
        audit.profile = profile?.name ?? "PROFILE"
        let environment = try runtime.environment(environmentName)
        return Target(
            name: environmentName, exposed: exposed, profile: profile, rules: rules,
            profileRuntime: profile.flatMap { environment.profiles[$0.name] })
    }

    /// The request `request` would take for these arguments, every default explicit, and its path
    /// normalised once (what the rules read); refused when it would carry or override what
    /// tokenrelay decides.
    private func requestParams(_ arguments: JSONObject, target: Target, audit: inout Audit) throws
        -> (RequestParams, MCPPath)
    {
        let profileRuntime = target.profileRuntime
        guard case .string(let path)? = arguments["path"] else {
            throw Refusal(
                message: "'path' is required: a path relative to the environment's base URL, starting with '/'")
        }
        if path.contains("://") || !path.hasPrefix("/") || path.hasPrefix("//") {
            throw Refusal(
                message:
                    "refused: '\(path.prefix(100))' is not a path under the base URL; absolute URLs are not allowed (give a path starting with a single '/')"
            )
        }
        try checkHeaders(arguments["headers"], credentialHeader: profileRuntime?.credentialHeader)
        if let name = Self.methodOverrideParameter(arguments) {
            throw Refusal(
                message:
                    "refused: the parameter '\(ServerText(name, maximumBytes: 64).value)' would override the method the rules decided on (Rails, Laravel and others read it); nothing was sent"
            )
        }
        if let secretParameters = profileRuntime?.secretQueryParameters, case .object(let query)? = arguments["query"] {
            for name in query.keys where secretParameters.contains(name) {
                throw Refusal(
                    message:
                        "refused: the query parameter '\(name)' carries the profile's credential; tokenrelay sets it")
            }
        }

        // The request as `request` would take it, with every default made explicit.
        var members = arguments
        members["environment"] = .string(target.name)
        if let profile = target.profile { members["profile"] = .string(profile.name) } else { members["profile"] = nil }
        let method = MCPRule.canonicalMethod(arguments["method"]?.stringValue ?? "GET")
        members["method"] = .string(method)
        var request: RequestParams
        do {
            request = try RequestParams.decode(.object(members))
        } catch {
            throw Refusal(message: "invalid arguments: \(Self.diagnosticsText(error))")
        }
        guard case .path(let template, let variables) = request.target else {
            throw Refusal(message: "refused: absolute URLs are not allowed")
        }
        let expanded: String
        do {
            expanded = try RequestMethod.expandedPath(template, variables: variables)
        } catch {
            throw Refusal(message: "invalid path: \(Self.diagnosticsText(error))")
        }
        let normalised: MCPPath
        switch MCPPath.normalise(expanded) {
        case .success(let value): normalised = value
        case .failure(let problem): throw Refusal(message: "refused: \(problem.description); nothing was sent")
        }
        request.target = .path(template: normalised.description, variables: [:])
        request.decodesContent = true
        audit.method = method
        audit.url = Self.auditURL(base: target.exposed.baseURL, path: normalised.description, query: request.query)
        return (request, normalised)
    }

    /// The rules' decision on the normalised path: `nil` to send, an outcome when the person is
    /// asked (a stateless client's first try); a refusal otherwise.
    private func decide(_ request: RequestParams, path normalised: MCPPath, target: Target, audit: inout Audit)
        async throws -> MCPToolOutcome?
    {
        let method = request.method
        let (rules, scope) = (target.rules, target.scope)
        let decision = rules.decide(method: method, path: normalised)
        switch decision {
        case .denied(let rule):
            audit.rule = "deny \(rule.text)"
            throw Refusal(
                message:
                    "refused by the rule deny '\(rule.text)' of \(scope): \(method) \(normalised) is not allowed; nothing was sent"
            )
        case .unlisted:
            throw Refusal(
                message:
                    "refused: no rule of \(scope) allows \(method) \(normalised); nothing was sent. Allowed: \(rules.allow.map(\.text)), with confirmation: \(rules.confirm.map(\.text))"
            )
        case .allowed(let rule):
            audit.rule = "allow \(rule.text)"
        case .confirm(let rule):
            audit.rule = "confirm \(rule.text)"
            let summary = Self.summary(method: method, url: audit.url, request: request, scope: scope)
            if let pending = try await confirm(summary: summary, request: request, rule: rule) {
                audit.outcome = "awaiting confirmation"
                return pending
            }
        }
        return nil
    }

    /// What sending a call came to: the API's answer, or a question to the person (a login).
    private enum Sent {
        case answered(HTTPResponse, Duration)
        case asked(MCPToolOutcome)
    }

    /// Sends the request through `request`'s own path; a session that needs a person starts its
    /// login and asks the person by URL elicitation when the client can be asked.
    private func send(_ request: RequestParams, target: Target, runtime: RelayRuntime, audit: inout Audit)
        async throws -> Sent
    {
        let (environmentName, profileRuntime) = (target.name, target.profileRuntime)
        do {
            let (response, elapsed) = try await RequestMethod(runtime: runtime).perform(request)
            return .answered(response, elapsed)
        } catch {
            let failure = ErrorMapping.rpcError(error)
            guard failure.kind == .interactionRequired, let session = profileRuntime?.session,
                face.supportsURLElicitation(era),
                let (prompt, started) = await face.startLogin(session, runtime: runtime)
            else { throw error }
            audit.outcome = started ? "login started" : "login pending"
            let profileName = target.profile?.name ?? ""
            let url = (prompt.verificationURIComplete ?? prompt.url).value
            let message =
                "Log in to \(environmentName) (profile \(profileName)) for tokenrelay"
                + (prompt.userCode.map { ", code \($0)" } ?? "")
            switch era {
            case .handshake:
                // Asked once per login: a retry while the person is at it only says so again.
                if started { face.openURL(url, message: message) }
            case .stateless:
                // The stateless revision asks through an input-required result; the client's
                // retry (with the person's answer) sends the call again, and goes through once
                // the login has completed in the background. A retry that answered and still
                // finds no session is told so, not asked again.
                if case .object(let responses)? = params?["inputResponses"], responses["login"] != nil {
                    break
                }
                audit.outcome = "awaiting login"
                let elicitation: JSONObject = [
                    "mode": "url", "message": .string(message), "url": .string(url),
                    "elicitationId": .string("tokenrelay-login-\(session.environment)-\(session.profile)"),
                ]
                return .asked(
                    .inputRequired(
                        requests: ["login": ["method": "elicitation/create", "params": .object(elicitation)]],
                        state: "login"))
            }
            throw Refusal(message: Self.loginText(prompt, environment: environmentName, profile: profileName))
        }
    }

    /// Headers some servers and frameworks take as the real method or path: with one of them,
    /// a call the rules allow could act as one they refuse.
    static let overridingHeaders: Set<String> = [
        "x-http-method-override", "x-http-method", "x-method-override", "x-original-url", "x-rewrite-url",
        "x-original-method", "x-forwarded-prefix",
    ]

    /// The parameter frameworks take as the real method (`_method`: Rails from a form body,
    /// Laravel and Symfony from the query, a form or a JSON body), when the agent's query, JSON
    /// body (top level) or form-encoded text body names it, in any case.
    static func methodOverrideParameter(_ arguments: JSONObject) -> String? {
        func overrides(_ name: String) -> Bool {
            // Decoded and lower-cased as the rules read a path segment.
            let decoded = MCPPath.routedSegment(name)
            return decoded == "_method" || overridingHeaders.contains(decoded)
        }
        if case .object(let query)? = arguments["query"], let name = query.keys.first(where: overrides) {
            return name
        }
        if case .object(let body)? = arguments["json"], let name = body.keys.first(where: overrides) { return name }
        if case .string(let text)? = arguments["text"] {
            for pair in text.split(separator: "&") {
                let name = String(pair.split(separator: "=", maxSplits: 1).first ?? "")
                if overrides(name) { return name }
            }
        }
        return nil
    }

    /// Headers that would make the answer a representation the masking cannot see whole: a
    /// content coding (compressed bytes hide an echoed secret; tokenrelay asks for the codings it
    /// decodes itself) or a byte range (a secret cut into pieces, each too short to match).
    static let representationHeaders: Set<String> = ["accept-encoding", "range", "if-range"]

    /// The coding of a response body the transport did not decode (a `Content-Encoding` other
    /// than `identity`, a `Transfer-Encoding` other than `chunked`), or `nil` when the body is
    /// plain: such a body would reach the agent with its secrets unmasked.
    static func undecodedCoding(_ headers: HTTPHeaders) -> String? {
        for (name, codings) in [("content-encoding", ["identity"]), ("transfer-encoding", ["chunked", "identity"])] {
            for value in headers.values(for: name) {
                for coding in value.split(separator: ",") {
                    let token = HTTPFieldRules.trimmingWhitespace(coding).lowercased()
                    if !token.isEmpty, !codings.contains(token) { return token }
                }
            }
        }
        return nil
    }

    /// Refuses the headers an agent may not set: `Authorization`, `Cookie`, `Proxy-*`, the
    /// profile's own credential header, the method and path overrides, and the fields that
    /// change the answer's representation (``representationHeaders``).
    private func checkHeaders(_ headers: JSONValue?, credentialHeader: String?) throws {
        guard case .object(let members)? = headers else { return }
        for name in members.keys {
            let lower = name.lowercased()
            if Self.representationHeaders.contains(lower) {
                throw Refusal(
                    message:
                        "refused: an agent may not set the '\(name.prefix(64))' header (tokenrelay asks for compressed answers and decodes them itself, and answers whole bodies, so that every secret in them can be masked); nothing was sent"
                )
            }
            if Self.overridingHeaders.contains(lower) {
                throw Refusal(
                    message:
                        "refused: the '\(name.prefix(64))' header would override the method or path the rules decided on; nothing was sent"
                )
            }
            if lower == "authorization" || lower == "cookie" || lower.hasPrefix("proxy-") || lower == credentialHeader {
                throw Refusal(
                    message:
                        "refused: an agent may not set the '\(name.prefix(64))' header (credentials are tokenrelay's to attach); nothing was sent"
                )
            }
        }
    }

    // MARK: - Answers

    /// The URL for logs and questions: query names, never their values; the agent's names
    /// cleaned as server text is (no control character can split a log line).
    static func auditURL(base: String, path: String, query: [(name: String, value: String)]) -> String {
        var url = RequestURL.join(base: base, path: path)
        if !query.isEmpty { url += "?" + query.map { "\($0.name)=…" }.joined(separator: "&") }
        return ServerText(url, maximumBytes: summaryBytes).value
    }

    /// The tool result of a response: every known secret masked (body bytes and header values),
    /// the body cut to `limit` bytes on a character boundary.
    static func encode(_ response: HTTPResponse, limit: Int, elapsed: Duration) -> MCPToolOutcome {
        let redactor = Redactor.shared
        var body = redactor.redact(bytes: response.body)
        var truncated = false
        if body.count > limit {
            var cut = limit
            // Back off to the start of the UTF-8 sequence the limit falls in.
            while cut > 0, cut < body.count, body[cut] & 0xC0 == 0x80, limit - cut < 4 { cut -= 1 }
            body = Array(body[..<cut])
            truncated = true
        }
        var headers = HTTPHeaders()
        for field in response.headers { headers.add(name: field.name, value: redactor.redact(field.value)) }
        var structured: JSONObject = [
            "status": .int(response.status), "headers": .object(ResponseEncoding.headerObject(headers)),
        ]
        let contentType = response.headers["content-type"]
        var bodyText = ""
        if !body.isEmpty {
            switch ResponseEncoding.body(body, contentType: contentType) {
            case .json(let text):
                // Once more after parsing: escapes a server wrote cannot unmask a secret.
                let bytes = redactor.redact(bytes: text.bytes)
                bodyText = String(decoding: bytes, as: UTF8.self)
                structured["json"] = (try? JSONParser.parse(bytes)) ?? .string(bodyText)
            case .text(let text):
                bodyText = redactor.redact(text)
                structured["text"] = .string(bodyText)
            case .base64(let encoded):
                bodyText = "(\(body.count) bytes of binary content: base64 in structuredContent.base64)"
                structured["base64"] = .string(encoded)
            }
        }
        structured["truncated"] = .bool(truncated)
        var text = "HTTP \(response.status)"
        if let contentType { text += "\ncontent-type: \(redactor.redact(contentType))" }
        text += "\nelapsed: \(DurationText.format(elapsed))"
        if truncated { text += "\n(body truncated at \(limit) bytes)" }
        if !bodyText.isEmpty { text += "\n\n" + bodyText }
        return .result(isError: false, structured: structured, text: text)
    }

    /// What the agent is told once a login was started and its page sent to the client to open.
    static func loginText(_ prompt: LoginPrompt, environment: String, profile: String) -> String {
        var page = (prompt.verificationURIComplete ?? prompt.url).value
        if prompt.verificationURIComplete == nil, let code = prompt.userCode { page += " (code \(code.value))" }
        return
            "not sent: profile '\(profile)' of environment '\(environment)' needs the person to log in. tokenrelay asked your client to open the login page: \(page). The login completes in the background: call again once the person has logged in (or they can run `tokenrelay login --env \(environment) --profile \(profile)`)."
    }

    /// What the agent is told when the request could not be made.
    static func failureText(_ failure: RPCError, environment: String, profile: String) -> String {
        switch failure.kind {
        case .interactionRequired:
            return
                "not sent: this profile needs the person to log in first. Ask them to run `tokenrelay login --env \(environment) --profile \(profile)` in a terminal, then call again. (\(failure.message))"
        case .auth:
            return
                "not sent: the credentials were refused when tokenrelay asked for a token (\(failure.message)); the person must fix the profile's configuration"
        case .transport, .timeout:
            return
                "the request failed (\(failure.kind.rawValue)): \(failure.message); the API may be unreachable, try again later"
        case .cancelled:
            return "cancelled"
        default:
            return "the request failed (\(failure.kind.rawValue)): \(failure.message)"
        }
    }

    static func diagnosticsText(_ error: any Error) -> String {
        let failure = ErrorMapping.rpcError(error)
        guard case .array(let diagnostics)? = failure.data["diagnostics"] else { return failure.message }
        return diagnostics.map { item in
            let pointer = item["pointer"]?.stringValue ?? ""
            return "\(pointer.isEmpty ? "arguments" : pointer): \(item["reason"]?.stringValue ?? "invalid")"
        }.joined(separator: "; ")
    }
}
