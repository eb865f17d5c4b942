import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging

/// The person's confirmation of a call a `confirm` rule matched (SPEC §8): asked by elicitation
/// in the handshake era, by an input-required result redeemed once in the stateless one.
extension HTTPRequestTool {
    /// Asks the person to accept the call: `nil` when accepted (send it), an input-required
    /// outcome for a stateless client's first try; throws a refusal otherwise.
    func confirm(summary: String, request: RequestParams, rule: MCPRule) async throws -> MCPToolOutcome? {
        let capabilities = face.clientCapabilities(era)
        guard MCPProtocol.supportsFormElicitation(capabilities) else {
            throw Refusal(
                message:
                    "refused: the rule confirm '\(rule.text)' needs the person's consent, and consent could not be asked (this MCP client did not declare the elicitation capability); nothing was sent"
            )
        }
        switch era {
        case .handshake(let version):
            // Waiting for a person is not work: the call leaves its concurrency slot meanwhile,
            // so pending questions never stall other calls (or `ping`).
            let answer = try await context.withoutExecutionSlot {
                await face.elicit(message: summary, version: version)
            }
            switch answer {
            case .success("accept"): return nil
            case .success(let action):
                throw Refusal(message: "not sent: the person did not accept (\(action.prefix(20)))")
            case .failure(let error):
                if error.kind == .cancelled { throw CancellationError() }
                throw Refusal(message: "not sent: consent could not be asked: \(error.message)")
            }
        case .stateless:
            let fingerprint = Self.fingerprint(request)
            if case .object(let responses)? = params?["inputResponses"], let answer = responses["confirm"] {
                guard case .string(let token)? = params?["requestState"],
                    face.redeemConfirmation(token, fingerprint: fingerprint)
                else {
                    throw Refusal(
                        message:
                            "not sent: the confirmation does not match this call or has expired; call again to ask the person again"
                    )
                }
                guard answer["action"]?.stringValue == "accept" else {
                    throw Refusal(message: "not sent: the person did not accept")
                }
                return nil
            }
            let token = face.issueConfirmation(fingerprint: fingerprint)
            var elicitation: JSONObject = ["mode": "form", "message": .string(summary)]
            elicitation["requestedSchema"] = MCPTools.consentSchema
            return .inputRequired(
                requests: ["confirm": ["method": "elicitation/create", "params": .object(elicitation)]], state: token)
        }
    }

    /// The bound on what the person is asked (UTF-8 bytes).
    static let summaryBytes = 2048

    /// What the person is asked: method, URL (query names only), body summary. The agent wrote
    /// most of it, so it is cleaned as server text is (``ServerText``: no control, bidirectional
    /// or invisible character can draw a line the request does not hold), masked and bounded.
    static func summary(method: String, url: String, request: RequestParams, scope: String) -> String {
        var text = "An agent asks tokenrelay to send \(method) \(url) (\(scope))."
        if let body = request.body {
            // Masked whole before it is cut: a secret across the cut never shows its start.
            let masked = Redactor.shared.redact(bytes: body.bytes)
            let preview = String(decoding: masked.prefix(300), as: UTF8.self)
            text += " Body (\(body.bytes.count) bytes): \(preview)\(masked.count > 300 ? "…" : "")"
        }
        return ServerText(text + " Accept to send it once.", maximumBytes: summaryBytes).value
    }

    /// Identifies a call exactly (what would be sent), binding a confirmation to it.
    static func fingerprint(_ request: RequestParams) -> String {
        var parts = [request.environment ?? "", request.profile ?? "", request.method]
        if case .path(let path, _) = request.target { parts.append(path) }
        parts.append(request.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&"))
        parts.append(request.headers.map { "\($0.name):\($0.value)" }.joined(separator: "\n"))
        parts.append(request.body.map { String(decoding: $0.bytes, as: UTF8.self) } ?? "")
        return parts.joined(separator: "\u{0}")
    }
}
