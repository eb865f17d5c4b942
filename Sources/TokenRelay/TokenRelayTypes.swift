import FoundationEssentials
import TokenRelayJSONRPC

/// A response: any HTTP status (a 404 is a response, not an error).
public struct TokenRelayResponse: Sendable {
    /// The status code.
    public let status: Int
    /// The header fields, in the order received.
    public let headers: [(name: String, value: String)]
    /// The body.
    public let body: [UInt8]

    /// The body as UTF-8 text (invalid sequences replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The first value of the header field `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// An access token handed out by ``TokenRelayClient/token(environment:profile:minimumValidity:)``.
public struct TokenRelayAccessToken: Sendable, CustomStringConvertible {
    /// The token. Never log it.
    public let value: String
    /// Its type (`Bearer`).
    public let type: String
    /// When it expires, if the server said.
    public let expiresAt: Date?

    /// Redacted: the token's value is never part of a description.
    public var description: String {
        "TokenRelayAccessToken(\(type), expiresAt: \(expiresAt.map { "\($0)" } ?? "unknown"))"
    }
}

/// What a person must do to log in.
public struct TokenRelayLoginPrompt: Sendable {
    /// The URL to open.
    public let url: String
    /// The code to enter there (device login); `nil` for a browser login.
    public let userCode: String?
}

/// Why a client could not be made or a call had no answer. `kind` is the stable error kind of
/// tokenrelay's protocol (`config`, `unknown_environment`, `unknown_profile`, `auth`,
/// `interaction_required`, `transport`, `timeout`, ...); `message` never holds a secret.
public struct TokenRelayError: Error, Sendable, CustomStringConvertible {
    public let kind: String
    public let message: String

    public init(kind: String, message: String) {
        self.kind = kind
        self.message = message
    }

    init(_ error: RPCError) {
        self.init(kind: error.kind.rawValue, message: error.message)
    }

    public var description: String { "\(kind): \(message)" }
}
