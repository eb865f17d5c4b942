import TokenRelayErrorKinds

/// A JSON-RPC error code. An open set: the standard codes and tokenrelay's own
/// (-32000...-32099) are static members; every code has a stable ``kind`` string.
///
/// None of tokenrelay's codes takes a meaning LSP reserves (SPEC §4.2): -32001
/// UnknownErrorCode, -32002 ServerNotInitialized and -32803...-32801 (RequestFailed,
/// ServerCancelled, ContentModified) are never sent; ``lspReserved`` lists them.
public struct ErrorCode: RawRepresentable, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    // JSON-RPC 2.0 and LSP.
    public static let parseError = ErrorCode(rawValue: -32700)
    public static let invalidRequest = ErrorCode(rawValue: -32600)
    public static let methodNotFound = ErrorCode(rawValue: -32601)
    public static let invalidParams = ErrorCode(rawValue: -32602)
    public static let internalError = ErrorCode(rawValue: -32603)
    public static let requestCancelled = ErrorCode(rawValue: -32800)

    // tokenrelay (documented in schemas/openrpc.json).
    // -32001 and -32002 were config and unknown_environment before protocol 2026-12-01.
    public static let config = ErrorCode(rawValue: -32004)
    public static let unknownEnvironment = ErrorCode(rawValue: -32005)
    public static let unknownProfile = ErrorCode(rawValue: -32003)
    public static let auth = ErrorCode(rawValue: -32010)
    public static let interactionRequired = ErrorCode(rawValue: -32011)
    public static let transport = ErrorCode(rawValue: -32020)
    public static let timeout = ErrorCode(rawValue: -32021)
    public static let limit = ErrorCode(rawValue: -32022)
    public static let shuttingDown = ErrorCode(rawValue: -32030)
    public static let notSupported = ErrorCode(rawValue: -32031)
    /// A `logout` ended the session the request was waiting on (SPEC §7).
    public static let loggedOut = ErrorCode(rawValue: -32032)
    /// The session store could not be read or written (SPEC §5.6).
    public static let store = ErrorCode(rawValue: -32033)

    /// Codes LSP gives a meaning of its own; tokenrelay sends none of them.
    public static let lspReserved: Set<Int> = [-32001, -32002, -32803, -32802, -32801]

    /// Every code tokenrelay sends, with its `data.kind`: the one table between codes and kinds.
    /// `http_status` and `protocol` describe a subscription's end only and have no code.
    public static let all: [(code: ErrorCode, kind: ErrorKind)] = [
        (.parseError, .parse), (.invalidRequest, .invalidRequest), (.methodNotFound, .methodNotFound),
        (.invalidParams, .invalidParams), (.internalError, .internal), (.requestCancelled, .cancelled),
        (.config, .config), (.unknownEnvironment, .unknownEnvironment), (.unknownProfile, .unknownProfile),
        (.auth, .auth), (.interactionRequired, .interactionRequired), (.transport, .transport),
        (.timeout, .timeout), (.limit, .limit), (.shuttingDown, .shuttingDown), (.notSupported, .notSupported),
        (.loggedOut, .loggedOut), (.store, .store),
    ]

    /// The stable `data.kind` of this code (`internal` for a code tokenrelay does not send).
    public var kind: ErrorKind {
        Self.all.first { $0.code == self }?.kind ?? .internal
    }

    /// The code an error of `kind` is sent with. The stream-only kinds (`http_status`,
    /// `protocol`) are transport failures when they end a request.
    public init(kind: ErrorKind) {
        self = Self.all.first { $0.kind == kind }?.code ?? .transport
    }
}
