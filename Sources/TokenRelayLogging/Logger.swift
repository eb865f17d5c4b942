import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes log lines to stderr (never stdout), at or above a level, as text or JSON lines,
/// with every registered secret masked by the ``Redactor``.
///
/// A line is formatted by the thread that logs, under no lock, and handed to one writer thread
/// (``LogWriter``) that writes whole lines, so lines never interleave and a slow stderr never
/// blocks the caller: past a bounded queue lines are dropped and counted, and the log says how
/// many once it has caught up. Call ``flush()`` before exiting.
public final class Logger: Sendable {
    /// The process-wide logger. Configure it once at start with ``configure(level:format:)``.
    public static let shared = Logger()

    private struct Settings {
        var level: LogLevel = .info
        var format: LogFormat = .text
    }

    private final class SettingsBox: Sendable {
        /// Guarded by the mutex: level and format (read briefly, never held while writing).
        let state = Mutex(Settings())
    }

    private let settings = SettingsBox()
    private let redactor: Redactor
    private let writer: LogWriter

    /// Creates a logger writing to `fileDescriptor` (stderr by default); past `queueBound`
    /// bytes of lines waiting for a slow reader, lines are dropped.
    public init(redactor: Redactor = .shared, fileDescriptor: Int32 = 2, queueBound: Int = LogWriter.defaultBound) {
        self.redactor = redactor
        let settings = self.settings
        writer = LogWriter(fileDescriptor: fileDescriptor, bound: queueBound) { count in
            let format = settings.state.withLock { $0.format }
            return Self.render(
                .warn, "\(count) log line(s) dropped: stderr was not read fast enough", [], format: format)
        }
    }

    /// Sets the threshold and the rendering.
    public func configure(level: LogLevel, format: LogFormat) {
        settings.state.withLock { $0 = Settings(level: level, format: format) }
    }

    /// The current threshold.
    public var level: LogLevel { settings.state.withLock { $0.level } }

    /// Waits (at most `timeout`) until every line logged so far is written: before exiting.
    public func flush(timeout: Duration = .seconds(2)) {
        let milliseconds = Int(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        writer.flush(timeout: .milliseconds(milliseconds))
    }

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

    /// Writes `text` as a line of its own for the person reading stderr (a login prompt), not a
    /// log record: unformatted and at every level, masked as every line is, and through the same
    /// writer, so that a stderr nobody reads never blocks the caller (the line is dropped then).
    public func notice(_ text: String) {
        var line = Array(redactor.redact(text).utf8)
        line.append(0x0A)
        writer.enqueue(line)
    }

    /// Writes one line if `level` is enabled. Message and field values are redacted.
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String, _ fields: @autoclosure () -> [(String, String)] = []
    ) {
        let current = settings.state.withLock { $0 }
        guard level <= current.level else { return }
        let text = redactor.redact(message())
        let redactedFields = fields().map { ($0.0, redactor.redact($0.1)) }
        writer.enqueue(Self.render(level, text, redactedFields, format: current.format))
    }

    /// One whole line, newline included.
    private static func render(_ level: LogLevel, _ text: String, _ fields: [(String, String)], format: LogFormat)
        -> [UInt8]
    {
        switch format {
        case .text:
            var rendered = "tokenrelay \(level): \(text)"
            for (key, value) in fields { rendered += " \(key)=\(value)" }
            return Array((rendered + "\n").utf8)
        case .json:
            var rendered = "{\"level\":\(Self.quoted(level.description)),\"message\":\(Self.quoted(text))"
            for (key, value) in fields { rendered += ",\(Self.quoted(key)):\(Self.quoted(value))" }
            return Array((rendered + "}\n").utf8)
        }
    }

    /// A JSON string literal for `text` (control characters, `"` and `\` escaped).
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// The process-wide logger, for brevity at call sites.
public let log = Logger.shared
