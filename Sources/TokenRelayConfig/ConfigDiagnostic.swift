import TokenRelayLogging

/// How serious a config problem is: errors make the config invalid, warnings do not.
public enum DiagnosticSeverity: String, Sendable, Hashable, Codable {
    case error, warning
}

/// One problem found in a config file, at a place in it. Messages never contain a secret: they
/// are built from key names and the file's own text, never from resolved secret values, and are
/// passed through the redactor as a last line of defence.
public struct ConfigDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// The config file's path as given (or `<memory>` for text decoded in memory).
    public var file: String
    /// 1-based line, or 0 when the problem concerns the whole file.
    public var line: Int
    /// 1-based column, or 0 when the problem concerns the whole file.
    public var column: Int
    /// Error or warning.
    public var severity: DiagnosticSeverity
    /// What is wrong and, where possible, how to fix it.
    public var message: String

    public init(file: String, mark: SourceMark, severity: DiagnosticSeverity, message: String) {
        self.file = file
        self.line = mark.line
        self.column = mark.column
        self.severity = severity
        self.message = Redactor.shared.redact(message)
    }

    /// The mark as a value.
    public var mark: SourceMark { SourceMark(line: line, column: column) }

    /// `file:line:column: message` (or `file: message` for whole-file problems).
    public var rendered: String { "\(location): \(message)" }

    /// `file:line:column: severity: message`, as `check-config` prints it.
    public var renderedWithSeverity: String { "\(location): \(severity.rawValue): \(message)" }

    /// `file:line:column`, or `file` for whole-file problems.
    public var location: String { line > 0 ? "\(file):\(line):\(column)" : file }

    public var description: String { renderedWithSeverity }
}

/// Collects diagnostics for one file.
struct DiagnosticSink {
    let file: String
    private(set) var diagnostics: [ConfigDiagnostic] = []

    init(file: String) { self.file = file }

    mutating func error(_ message: String, at mark: SourceMark) {
        diagnostics.append(ConfigDiagnostic(file: file, mark: mark, severity: .error, message: message))
    }

    mutating func warning(_ message: String, at mark: SourceMark) {
        diagnostics.append(ConfigDiagnostic(file: file, mark: mark, severity: .warning, message: message))
    }

    var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }
}
