import FoundationEssentials
import TokenRelayAuth
import TokenRelayJSONRPC

/// The shapes a credential helper hands a token out in (SPEC §4.5). The `token-get` method and
/// `tokenrelay token` both render through ``value(_:version:)``, so they never differ.
public enum TokenFormat: String, Sendable, CaseIterable {
    /// The token alone (the command prints it and a newline).
    case raw
    /// `Authorization: Bearer …`.
    case header
    /// `{access_token, token_type, expires_at}`.
    case json
    /// A Kubernetes ExecCredential, for a kubeconfig `exec:` entry.
    case execCredential = "exec-credential"

    /// The formats the `token-get` method takes (`raw` is the command's bare form of `json`).
    static let methodFormats: [TokenFormat] = [.json, .header, .execCredential]

    /// The token in this format: a string for `raw` and `header`, an object otherwise.
    func value(_ token: Token, version: ExecCredentialVersion) -> JSONValue {
        let expiry = token.expiresAt.map { JSONValue.string($0.rfc3339) }
        switch self {
        case .raw:
            return .string(token.accessToken)
        case .header:
            return .string("Authorization: Bearer \(token.accessToken)")
        case .json:
            var object: JSONObject = ["access_token": .string(token.accessToken), "token_type": "Bearer"]
            if let expiry { object["expires_at"] = expiry }
            return .object(object)
        case .execCredential:
            var status: JSONObject = ["token": .string(token.accessToken)]
            if let expiry { status["expirationTimestamp"] = expiry }
            return [
                "apiVersion": .string(version.rawValue), "kind": "ExecCredential", "status": .object(status),
            ]
        }
    }

    /// What `tokenrelay token` prints: the value's text (strings as they are, objects as JSON)
    /// and a newline.
    package func text(_ token: Token, version: ExecCredentialVersion) -> String {
        switch value(token, version: version) {
        case .string(let text): text + "\n"
        case let other: other.jsonText + "\n"
        }
    }
}

/// The ExecCredential API versions tokenrelay speaks (kubectl says which it wants in
/// `KUBERNETES_EXEC_INFO`).
public enum ExecCredentialVersion: String, Sendable, CaseIterable {
    case v1 = "client.authentication.k8s.io/v1"
    case v1beta1 = "client.authentication.k8s.io/v1beta1"

    /// The version a `KUBERNETES_EXEC_INFO` value asks for: `v1` when it is unset or empty, its
    /// `apiVersion` otherwise. Malformed JSON and unknown versions are clear errors.
    public static func fromExecInfo(_ info: String?) throws(RPCError) -> ExecCredentialVersion {
        guard let info, !info.allSatisfy(\.isWhitespace) else { return .v1 }
        guard case .object(let object)? = try? JSONParser.parse(Array(info.utf8)) else {
            throw RPCError.invalidParams([], message: "KUBERNETES_EXEC_INFO is not a JSON object")
        }
        guard case .string(let text)? = object["apiVersion"] else {
            throw RPCError.invalidParams([], message: "KUBERNETES_EXEC_INFO has no apiVersion string")
        }
        guard let version = ExecCredentialVersion(rawValue: text) else {
            throw RPCError.invalidParams([], message: "KUBERNETES_EXEC_INFO: " + unknownVersionMessage(text))
        }
        return version
    }

    /// Why `text` is refused as an apiVersion.
    static func unknownVersionMessage(_ text: String) -> String {
        "unknown ExecCredential apiVersion '\(text.prefix(100))'; tokenrelay speaks "
            + allCases.map(\.rawValue).joined(separator: " and ")
    }
}
