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
            case .transport: mapped = RPCError(code: .transport, message: error.description)
            case .timeout: mapped = RPCError(code: .timeout, message: "the request timed out")
            case .bodyTooLarge: mapped = RPCError(code: .limit, message: error.description)
            case .invalidURL: mapped = RPCError(code: .invalidParams, message: error.description)
            case .cancelled: mapped = .cancelled
            }
        default:
            mapped = RPCError(code: .internalError, message: "internal error: \(String(describing: type(of: error)))")
        }
        mapped.message = Redactor.shared.redact(mapped.message)
        return mapped
    }
}
