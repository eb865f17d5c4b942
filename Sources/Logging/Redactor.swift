import Synchronization

/// Masks every secret value it has been told about (config secrets, tokens) in any text
/// that is about to leave the process as a log line or an error message.
///
/// Secrets are registered as soon as they are resolved or received; the redactor keeps them
/// for the life of the process. Values shorter than `minimumLength` are not registered: masking
/// two-letter strings everywhere would destroy logs without protecting anything.
public final class Redactor: Sendable {
    /// The process-wide redactor used by the logger and by error descriptions.
    public static let shared = Redactor()

    /// The replacement text for a secret.
    public static let mask = "[REDACTED]"

    /// Secrets shorter than this are ignored.
    public let minimumLength: Int

    /// Guarded by the mutex: registered secrets, longest first so that a secret containing
    /// another is masked whole.
    private let secrets = Mutex<[String]>([])

    public init(minimumLength: Int = 4) {
        self.minimumLength = minimumLength
    }

    /// Registers a secret value; it is masked in every later `redact(_:)` call.
    public func register(_ secret: String) {
        guard secret.utf8.count >= minimumLength else { return }
        secrets.withLock { list in
            guard !list.contains(secret) else { return }
            list.append(secret)
            list.sort { $0.utf8.count > $1.utf8.count }
        }
        // A secret may also reach a log line percent-encoded or base64-encoded as part of a
        // header; the callers that build such forms register those forms too.
    }

    /// Whether any secret has been registered.
    public var isEmpty: Bool { secrets.withLock { $0.isEmpty } }

    /// Returns `text` with every registered secret replaced by ``mask``.
    public func redact(_ text: String) -> String {
        let list = secrets.withLock { $0 }
        guard !list.isEmpty else { return text }
        var result = text
        for secret in list where result.contains(secret) {
            result = result.replacingAll(secret, with: Redactor.mask)
        }
        return result
    }
}

extension String {
    /// Replaces every occurrence of `target` (non-empty) with `replacement`, without Foundation.
    func replacingAll(_ target: String, with replacement: String) -> String {
        let source = Array(utf8)
        let needle = Array(target.utf8)
        guard !needle.isEmpty, source.count >= needle.count else { return self }
        var output: [UInt8] = []
        output.reserveCapacity(source.count)
        var index = 0
        while index < source.count {
            if index + needle.count <= source.count, source[index] == needle[0],
                source[index..<(index + needle.count)].elementsEqual(needle)
            {
                output.append(contentsOf: replacement.utf8)
                index += needle.count
            } else {
                output.append(source[index])
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
