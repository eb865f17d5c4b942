/// The stable wire `kind` of every error tokenrelay reports (SPEC §4.4): the `data.kind` of a
/// JSON-RPC error, the `kind` of a subscription's `closed`/`reconnecting` notification and the
/// key of the exit-code table. The raw values are the wire strings; they never change.
///
/// Every module's error type exposes its kind through ``KindedError`` so that one mapping (in
/// Relay) turns any error into a wire error without re-reading strings.
public enum ErrorKind: String, Sendable, Hashable, CaseIterable, Codable {
    // The standard JSON-RPC / LSP codes.
    case parse
    case invalidRequest = "invalid_request"
    case methodNotFound = "method_not_found"
    case invalidParams = "invalid_params"
    case `internal`
    case cancelled

    // tokenrelay's own.
    case config
    case unknownEnvironment = "unknown_environment"
    case unknownProfile = "unknown_profile"
    case auth
    case interactionRequired = "interaction_required"
    case transport
    case timeout
    case limit
    case shuttingDown = "shutting_down"
    case loggedOut = "logged_out"
    case notSupported = "not_supported"
    /// The session store could not be read or written: another program held its write lock past
    /// the busy timeout, the disk failed, or a record does not open under the store's key. Not a
    /// bug (`internal`) and not a configuration to fix (`config`, which a store that cannot be
    /// opened as configured is).
    case store

    // Event streams only: a status that is not a stream, a response that is not a valid stream.
    case httpStatus = "http_status"
    case `protocol`
}

/// An error that knows its wire kind.
public protocol KindedError: Error {
    /// The stable kind of the SPEC's error `data.kind`.
    var errorKind: ErrorKind { get }
}
