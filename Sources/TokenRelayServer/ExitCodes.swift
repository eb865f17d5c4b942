import TokenRelayErrorKinds

/// The exit codes of the one-shot commands (README "Exit codes"), and the one table from an
/// error's kind to the code a failed command exits with. README's table of failures by kind is
/// ``failureTableMarkdown``; a test keeps the two in step.
public enum ExitCodes {
    /// The commands whose failures the table covers.
    public enum Command: Sendable, CaseIterable {
        /// `call` and `subscribe`.
        case call
        /// `login`.
        case login
        /// `token` (credential-helper mode).
        case token
        /// `status`, `logout`, `invalidate` and `store`.
        case sessions
    }

    public static let success: Int32 = 0
    /// `exit` without `shutdown`, or a session command that failed.
    public static let failure: Int32 = 1
    public static let usage: Int32 = 2
    public static let config: Int32 = 3
    /// `call`: the response status was 4xx.
    public static let clientError: Int32 = 4
    /// `call`: the response status was 5xx.
    public static let serverError: Int32 = 5
    /// `call`: any other status (a 3xx is never followed).
    public static let otherStatus: Int32 = 6
    /// The request (or the token) could not be had: connection, TLS, timeout, limit.
    public static let requestFailed: Int32 = 7
    /// Credentials were refused (`call`, `token`), or the login failed (`login`).
    public static let authFailed: Int32 = 8
    /// `token`: the profile needs an interactive login first.
    public static let interactionRequired: Int32 = 9

    /// One row of the table: the exit code of a failure of `kind` in each command.
    public struct Row: Sendable {
        public let kind: ErrorKind
        public let call: Int32
        public let login: Int32
        public let token: Int32
        public let sessions: Int32

        public func code(_ command: Command) -> Int32 {
            switch command {
            case .call: call
            case .login: login
            case .token: token
            case .sessions: sessions
            }
        }
    }

    private static func row(_ kind: ErrorKind, _ call: Int32, _ login: Int32, _ token: Int32, _ sessions: Int32) -> Row
    {
        Row(kind: kind, call: call, login: login, token: token, sessions: sessions)
    }

    /// Every kind, in ``ErrorKind`` order: the exit code a command's failure of that kind gives.
    public static let table: [Row] = [
        row(.parse, requestFailed, authFailed, requestFailed, failure),
        row(.invalidRequest, requestFailed, authFailed, requestFailed, failure),
        row(.methodNotFound, requestFailed, authFailed, requestFailed, failure),
        row(.invalidParams, usage, usage, usage, usage),
        row(.internal, requestFailed, authFailed, requestFailed, failure),
        row(.cancelled, requestFailed, authFailed, requestFailed, failure),
        row(.config, config, config, config, config),
        row(.unknownEnvironment, config, config, config, config),
        row(.unknownProfile, config, config, config, config),
        row(.auth, authFailed, authFailed, authFailed, failure),
        row(.interactionRequired, authFailed, authFailed, interactionRequired, failure),
        row(.transport, requestFailed, authFailed, requestFailed, failure),
        row(.timeout, requestFailed, authFailed, requestFailed, failure),
        row(.limit, requestFailed, authFailed, requestFailed, failure),
        row(.shuttingDown, requestFailed, authFailed, requestFailed, failure),
        row(.loggedOut, requestFailed, authFailed, requestFailed, failure),
        row(.notSupported, requestFailed, config, config, failure),
        row(.store, requestFailed, authFailed, requestFailed, failure),
        row(.httpStatus, requestFailed, authFailed, requestFailed, failure),
        row(.protocol, requestFailed, authFailed, requestFailed, failure),
    ]

    /// The exit code of `command` failing with an error of `kind`.
    public static func code(for kind: ErrorKind, in command: Command) -> Int32 {
        (table.first { $0.kind == kind } ?? table.first { $0.kind == .internal })?.code(command) ?? failure
    }

    /// README's table of failures by kind, rendered from ``table``.
    public static var failureTableMarkdown: String {
        var lines = [
            "| error kind | `call`, `subscribe` | `login` | `token` | `status`, `logout`, `invalidate`, `store` |",
            "|---|---|---|---|---|",
        ]
        for row in table {
            lines.append("| `\(row.kind.rawValue)` | \(row.call) | \(row.login) | \(row.token) | \(row.sessions) |")
        }
        return lines.joined(separator: "\n")
    }
}
