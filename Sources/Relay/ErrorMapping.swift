import Auth
import Config
import HTTP
import JSONRPC
import Logging

/// The one place where any error becomes a JSON-RPC error. Messages are redacted: no secret
/// registered with the redactor can leave through an error.
public enum ErrorMapping {
    public static func rpcError(_ error: any Error) -> RPCError {
        var mapped: RPCError
        switch error {
        case let error as RPCError:
            mapped = error
        case is CancellationError:
            mapped = .cancelled
        case let error as HTTPError:
            switch error {
            case .transport, .tls: mapped = RPCError(code: .transport, message: error.description)
            case .timeout: mapped = RPCError(code: .timeout, message: "the request timed out")
            case .bodyTooLarge: mapped = RPCError(code: .limit, message: error.description)
            case .invalidURL, .invalidRequest: mapped = RPCError(code: .invalidParams, message: error.description)
            case .cancelled: mapped = .cancelled
            }
        case let error as AuthError:
            mapped = authError(error)
        case let error as SecretError:
            mapped = RPCError(code: .config, message: "secret unavailable: \(error.description)")
        case let error as HTTPStreamStalled:
            mapped = RPCError(code: .timeout, message: error.description)
        default:
            mapped = RPCError(code: .internalError, message: "internal error: \(String(describing: type(of: error)))")
        }
        mapped.message = Redactor.shared.redact(mapped.message)
        return mapped
    }

    static func authError(_ error: AuthError) -> RPCError {
        let code: ErrorCode =
            switch error.kind {
            case "interaction_required": .interactionRequired
            case "transport": .transport
            case "timeout": .timeout
            case "cancelled": .requestCancelled
            case "config": .config
            case "auth": .auth
            case "limit": .limit
            default: .internalError
            }
        var data = JSONObject()
        if let oauthError = error.oauthError { data["oauthError"] = .string(oauthError) }
        if let description = error.oauthErrorDescription { data["oauthErrorDescription"] = .string(description) }
        if error.needsLogin { data["login"] = true }
        return RPCError(code: code, message: error.description, kind: error.kind, data: data)
    }
}
