import TokenRelayAuth
import TokenRelayConfig
import TokenRelayErrorKinds
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// The one place where any error becomes a JSON-RPC error. Every module's error exposes its wire
/// kind (``KindedError``); the code follows from the kind (``ErrorCode/init(kind:)``), so code and
/// kind always agree. Messages are redacted: no secret registered with the redactor can leave
/// through an error.
public enum ErrorMapping {
    public static func rpcError(_ error: any Error) -> RPCError {
        var mapped: RPCError
        switch error {
        case let error as RPCError:
            mapped = error
        case is CancellationError:
            mapped = .cancelled
        case let error as any KindedError:
            mapped = error.errorKind == .cancelled ? .cancelled : kinded(error)
        default:
            mapped = RPCError(kind: .internal, message: "internal error: \(String(describing: type(of: error)))")
        }
        if mapped.kind == .invalidParams && mapped.data["diagnostics"] == nil {
            // -32602 always says where (SPEC §4.4); an error that cannot name a member points at the params.
            mapped.data["diagnostics"] = [["pointer": "", "reason": .string(mapped.message)]]
        }
        mapped.message = Redactor.shared.redact(mapped.message)
        return mapped
    }

    /// A kinded error with the message and `data` members its type carries.
    private static func kinded(_ error: any KindedError) -> RPCError {
        switch error {
        case let error as AuthError:
            var data = JSONObject()
            if let oauthError = error.oauthError { data["oauthError"] = .string(oauthError) }
            if let description = error.oauthErrorDescription { data["oauthErrorDescription"] = .string(description) }
            if error.needsLogin { data["login"] = true }
            if !error.loginScopes.isEmpty { data["scopes"] = .array(error.loginScopes.map { .string($0) }) }
            return RPCError(kind: error.errorKind, message: error.description, data: data)
        case HTTPError.timeout:
            return RPCError(kind: .timeout, message: "the request timed out")
        case let error as SecretError:
            return RPCError(kind: error.errorKind, message: "secret unavailable: \(error.description)")
        default:
            return RPCError(kind: error.errorKind, message: String(describing: error))
        }
    }
}
