import TokenRelayLogging

/// Why a secret could not be resolved. Descriptions name where the secret comes from (variable
/// name, file path, command name and exit status) but never a secret value or command output
/// other than redacted, bounded stderr.
public struct SecretError: Error, Sendable, CustomStringConvertible {
    /// `file:line:column` of the secret source in the config.
    public var location: String
    /// What went wrong.
    public var message: String

    public init(location: String, message: String) {
        self.location = location
        self.message = Redactor.shared.redact(message)
    }

    public var description: String { "\(location): \(message)" }
}

/// What a secret source resolves secrets with: the process environment (injected), files and
/// commands.
public struct SecretResolver: Sendable, CustomStringConvertible {
    /// The environment variables (`{ env: NAME }`, PATH lookup and the command's environment).
    public var environment: [String: String]
    /// Reads `{ file: path }` sources.
    public var fileSystem: any ConfigFileSystem
    /// Runs `{ command: [argv] }` sources.
    public var commandRunner: any SecretCommandRunner

    public init(
        environment: [String: String], fileSystem: any ConfigFileSystem = LocalFileSystem(),
        commandRunner: any SecretCommandRunner = ProcessCommandRunner()
    ) {
        self.environment = environment
        self.fileSystem = fileSystem
        self.commandRunner = commandRunner
    }

    public var description: String { "SecretResolver(\(environment.count) variables)" }
}

/// Where a secret comes from. Resolution is lazy (``resolve()``); the value is registered with
/// ``Redactor/shared`` as soon as it is read and never appears in any description.
public struct SecretSource: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kind of source, without the value.
    public enum Origin: Sendable, Hashable {
        /// Written in the config file itself (discouraged).
        case inline
        /// `{ env: NAME }`.
        case environment(name: String)
        /// `{ file: path }`, the path absolute and `~`-expanded.
        case file(path: String)
        /// `{ command: [argv], timeout: 10s }`.
        case command(argv: [String], timeout: Duration)
    }

    /// Where the secret comes from.
    public let origin: Origin
    /// The config file that declared it.
    public let file: String
    /// Where in that file.
    public let mark: SourceMark
    /// The key that declared it (`profiles.api.auth.client_secret`), for messages.
    public let keyPath: String
    /// Only for `.inline`: the value (registered with the redactor when decoded).
    let inlineValue: String?
    /// What the value must look like.
    public let format: Format
    private let resolver: SecretResolver

    /// What a secret's value is.
    public enum Format: Sendable, Hashable {
        /// One line of text (a secret sent in a header or a form): no line breaks.
        case any
        /// A PEM private key (`-----BEGIN ... PRIVATE KEY-----`), lines and all.
        case pemPrivateKey
        /// One or more PEM certificates (`-----BEGIN CERTIFICATE-----`).
        case pemCertificate
    }

    init(
        origin: Origin, inlineValue: String? = nil, file: String, mark: SourceMark, keyPath: String = "secret",
        format: Format = .any, resolver: SecretResolver
    ) {
        self.format = format
        self.origin = origin
        self.inlineValue = inlineValue
        self.file = file
        self.mark = mark
        self.keyPath = keyPath
        self.resolver = resolver
        if let inlineValue { Redactor.shared.register(inlineValue) }
    }

    /// A source holding `value` directly (for programs that build settings in code).
    public static func inline(_ value: String) -> SecretSource {
        SecretSource(
            origin: .inline, inlineValue: value, file: "<code>", mark: .file, resolver: SecretResolver(environment: [:])
        )
    }

    /// Whether resolving runs a command (the only kind a bearer `cache` applies to).
    public var isCommand: Bool {
        if case .command = origin { return true }
        return false
    }

    /// A source as declared: its key and where (a YAML alias is its anchor's source again).
    struct Identity: Hashable {
        let keyPath: String
        let file: String
        let mark: SourceMark
    }

    /// Which declaration this source is.
    var identity: Identity { Identity(keyPath: keyPath, file: file, mark: mark) }

    /// `file:line:column` of the declaration.
    public var location: String { mark.line > 0 ? "\(file):\(mark)" : file }

    /// Reads the secret now (every call reads again: files and commands may change). The value
    /// is registered with ``Redactor/shared`` before it is returned.
    public func resolve() async throws(SecretError) -> String {
        let value: String
        switch origin {
        case .inline:
            value = inlineValue ?? ""
        case .environment(let name):
            guard let found = resolver.environment[name], !found.isEmpty else {
                throw SecretError(location: location, message: "environment variable \(name) is not set or empty")
            }
            value = found
        case .file(let path):
            let bytes: [UInt8]
            do {
                bytes = try resolver.fileSystem.contents(atPath: path)
            } catch {
                throw SecretError(location: location, message: "secret file \(error)")
            }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw SecretError(location: location, message: "secret file \(path) is not UTF-8 text")
            }
            value = Self.trimmingOneNewline(text)
        case .command(let argv, let timeout):
            let output: [UInt8]
            do {
                output = try await resolver.commandRunner.run(
                    argv: argv, environment: resolver.environment, timeout: timeout)
            } catch {
                throw SecretError(location: location, message: error.description)
            }
            guard let text = String(validating: output, as: UTF8.self) else {
                throw SecretError(
                    location: location, message: "the output of \(argv.first ?? "command") is not UTF-8 text")
            }
            value = Self.trimmingOneNewline(text)
        }
        switch origin {
        case .inline, .environment: Redactor.shared.register(value)
        // Files and commands may give a new value each time: kept while recent (see Redactor).
        case .file, .command: Redactor.shared.registerToken(value)
        }
        guard !value.isEmpty else {
            throw SecretError(location: location, message: "the secret from \(originDescription) is empty")
        }
        if format != .any {
            // A PEM text: its lines (the base64 body) are registered one by one as well, so that
            // no fragment of it can reach a log either.
            let lines = value.split(whereSeparator: \.isNewline).map(String.init).filter {
                !$0.hasPrefix("-----") && $0.utf8.count >= Redactor.minimumSecretLength
            }
            Redactor.shared.registerTokens(lines)
            let marker = format == .pemPrivateKey ? "PRIVATE KEY-----" : "-----BEGIN CERTIFICATE-----"
            guard value.contains("-----BEGIN "), value.contains(marker), !value.utf8.contains(0) else {
                throw SecretError(
                    location: location,
                    message: "the secret '\(keyPath)' from \(originDescription) is not a PEM "
                        + (format == .pemPrivateKey ? "private key" : "certificate"))
            }
            return value
        }
        guard !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0x00 }) else {
            // It would end a header line (or a C string) on the wire: refused here, by its key,
            // rather than as a request error later.
            throw SecretError(
                location: location,
                message: "the secret '\(keyPath)' from \(originDescription) contains a line break (CR or LF) or a "
                    + "NUL byte; such a value cannot be sent in a header and is refused")
        }
        guard value.utf8.count >= Redactor.minimumSecretLength else {
            // The redactor cannot mask a value this short without destroying every log line.
            throw SecretError(
                location: location,
                message: "the secret '\(keyPath)' from \(originDescription) is shorter than "
                    + "\(Redactor.minimumSecretLength) bytes; such a value cannot be kept out of logs and is refused")
        }
        return value
    }

    /// Drops one trailing `\n` (or `\r\n`).
    static func trimmingOneNewline(_ text: String) -> String {
        if text.hasSuffix("\r\n") { return String(text.dropLast(2)) }
        if text.hasSuffix("\n") { return String(text.dropLast()) }
        return text
    }

    /// Where the secret comes from, without any value.
    public var originDescription: String {
        switch origin {
        case .inline: return "inline value"
        case .environment(let name): return "env \(name)"
        case .file(let path): return "file \(path)"
        case .command(let argv, _): return "command \(argv.first ?? "")"
        }
    }

    public var description: String { "SecretSource(\(originDescription))" }
    public var debugDescription: String { description }
}

extension SecretSource: CustomReflectable {
    /// Only the origin and location: `dump` and debuggers never see an inline value.
    public var customMirror: Mirror {
        Mirror(self, children: ["origin": origin, "file": file, "mark": mark], displayStyle: .struct)
    }
}
