import TokenRelayAuth
import TokenRelayJSONRPC

/// `token-get {environment?, profile?, format?, minValid?, apiVersion?}` (SPEC §4.5): an access
/// token, only for profiles with `expose_token: true`, through the same path as `tokenrelay token`.
enum TokenGetMethod: RelayMethod {
    static let method = "token-get"

    struct Params: MethodParams {
        var environment: String?
        var profile: String?
        var format = TokenFormat.json
        var minimumValidity: Duration?
        var version = ExecCredentialVersion.v1

        init(decoding params: JSONValue?) throws(RPCError) {
            var reader = try ParamReader(
                params, allowed: ["environment", "profile", "format", "minValid", "apiVersion"])
            environment = reader.string("environment")
            profile = reader.string("profile")
            if let name = reader.string("format") {
                if let chosen = TokenFormat(rawValue: name), TokenFormat.methodFormats.contains(chosen) {
                    format = chosen
                } else {
                    reader.report(
                        ["format"],
                        "must be one of \(TokenFormat.methodFormats.map(\.rawValue).joined(separator: ", "))")
                }
            }
            minimumValidity = reader.integer("minValid", in: 0...86_400).map { Duration.seconds($0) }
            if let text = reader.string("apiVersion") {
                if format != .execCredential {
                    reader.report(["apiVersion"], "only applies to format exec-credential")
                } else if let named = ExecCredentialVersion(rawValue: text) {
                    version = named
                } else {
                    reader.report(["apiVersion"], ExecCredentialVersion.unknownVersionMessage(text))
                }
            }
            try reader.finish()
        }
    }

    /// The token in the format asked for (the same rendering as `tokenrelay token`): `json`
    /// `{access_token, token_type, expires_at?}`, `header` a string, `exec-credential` an
    /// ExecCredential. The expiry members are absent when the token's expiry is unknown.
    struct Result: MethodResult {
        /// The token issued (this is the one method whose result carries a token).
        var token: Token
        /// The rendering asked for.
        var format: TokenFormat
        /// The ExecCredential version (`exec-credential` only).
        var version = ExecCredentialVersion.v1

        var resultValue: JSONValue { format.value(token, version: version) }

        /// The result's schema in the OpenRPC document: one branch per format.
        static let schema: JSONValue = [
            "oneOf": [
                [
                    "title": "json", "type": "object", "required": ["access_token", "token_type"],
                    "properties": [
                        "access_token": Schema.string, "token_type": ["const": "Bearer"], "expires_at": Schema.dateTime,
                    ],
                ],
                ["title": "header", "type": "string", "pattern": "^Authorization: Bearer "],
                [
                    "title": "exec-credential", "type": "object", "required": ["apiVersion", "kind", "status"],
                    "properties": [
                        "apiVersion": Schema.oneOf(versions), "kind": ["const": "ExecCredential"],
                        "status": Schema.object(
                            ["token": Schema.string, "expirationTimestamp": Schema.dateTime], required: ["token"]),
                    ],
                ],
            ]
        ]
    }

    static func handle(_ params: Params, in context: MethodContext) async throws -> Result {
        try await context.withRuntime { try await context.tokens($0).tokenGet(params) }
    }

    private static let versions = [ExecCredentialVersion.v1.rawValue, ExecCredentialVersion.v1beta1.rawValue]

    static let openRPC = MethodDescription(
        name: method,
        summary: "Returns an access token, only for profiles with expose_token: true (credential-helper use).",
        description:
            "Interactive profiles never prompt here: without a session they answer interaction_required. The expiry fields are absent when the token server gave no expires_in.",
        params: SharedParams.session + [
            param(
                "format",
                "json (default): {access_token, token_type, expires_at}; header: the string 'Authorization: Bearer ...'; exec-credential: a Kubernetes ExecCredential.",
                Schema.oneOf(["json", "header", "exec-credential"])),
            param(
                "minValid",
                "Seconds the returned token must stay valid; a held token expiring sooner is renewed first (default 60). A freshly issued token is returned even when the server grants less.",
                ["type": "integer", "minimum": 0, "maximum": 86_400]),
            param(
                "apiVersion",
                "The ExecCredential apiVersion (format exec-credential only; default client.authentication.k8s.io/v1).",
                Schema.oneOf(versions)),
        ],
        result: Result.schema,
        errors: MethodDescription.requestErrors + [.notSupported])
}
