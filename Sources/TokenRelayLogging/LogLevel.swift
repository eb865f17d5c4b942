/// Severity of a log line, from the most to the least severe (SPEC §7).
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case error = 0
    case warn
    case info
    case debug
    case trace

    /// Parses the command-line spelling (`error`, `warn`, `info`, `debug`, `trace`).
    public init?(name: String) {
        switch name.lowercased() {
        case "error": self = .error
        case "warn", "warning": self = .warn
        case "info": self = .info
        case "debug": self = .debug
        case "trace": self = .trace
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .error: "error"
        case .warn: "warn"
        case .info: "info"
        case .debug: "debug"
        case .trace: "trace"
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// How log lines are rendered on stderr.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}
