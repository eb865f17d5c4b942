import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes log lines to stderr (never stdout), at or above a level, as text or JSON lines,
/// with every registered secret masked by the ``Redactor``.
///
/// One lock serialises whole lines, so concurrent loggers never interleave.
public final class Logger: Sendable {
    /// The process-wide logger. Configure it once at start with ``configure(level:format:)``.
    public static let shared = Logger()

    private struct Settings {
        var level: LogLevel = .info
        var format: LogFormat = .text
    }

    /// Guarded by the mutex: level and format. Lines are written while holding it.
    private let settings = Mutex(Settings())
    private let redactor: Redactor
    private let fileDescriptor: Int32

    /// Creates a logger writing to `fileDescriptor` (stderr by default).
    public init(redactor: Redactor = .shared, fileDescriptor: Int32 = 2) {
        self.redactor = redactor
        self.fileDescriptor = fileDescriptor
    }

    /// Sets the threshold and the rendering.
    public func configure(level: LogLevel, format: LogFormat) {
        settings.withLock { $0 = Settings(level: level, format: format) }
    }

    /// The current threshold.
    public var level: LogLevel { settings.withLock { $0.level } }

    /// Whether a line at `level` would be written (use it to skip building costly messages).
    public func isEnabled(_ level: LogLevel) -> Bool { level <= self.level }

    public func error(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []) {
        log(.error, message(), fields())
    }
    public func warn(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []) {
        log(.warn, message(), fields())
    }
    public func info(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []) {
        log(.info, message(), fields())
    }
    public func debug(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []) {
        log(.debug, message(), fields())
    }
    public func trace(_ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []) {
        log(.trace, message(), fields())
    }

    /// Writes one line if `level` is enabled. Message and field values are redacted.
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []
    ) {
        let current = settings.withLock { $0 }
        guard level <= current.level else { return }
        let text = redactor.redact(message())
        let redactedFields = fields().map { ($0.0, redactor.redact($0.1)) }
        let line: String
        switch current.format {
        case .text:
            var rendered = "tokenrelay \(level): \(text)"
            for (key, value) in redactedFields { rendered += " \(key)=\(value)" }
            line = rendered + "\n"
        case .json:
            var rendered = "{\"level\":\(Self.quoted(level.description)),\"message\":\(Self.quoted(text))"
            for (key, value) in redactedFields { rendered += ",\(Self.quoted(key)):\(Self.quoted(value))" }
            line = rendered + "}\n"
        }
        settings.withLock { _ in writeAll(line) }
    }

    private func writeAll(_ line: String) {
        OutputFile.writeAll(fileDescriptor, Array(line.utf8))
    }

    /// A JSON string literal for `text`.
    static func quoted(_ text: String) -> String { OutputFile.jsonQuoted(text) }
}

/// The process-wide logger, for brevity at call sites.
public let log = Logger.shared
