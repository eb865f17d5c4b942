import Synchronization

/// Masks every secret value it has been told about (config secrets, tokens) in any text
/// that is about to leave the process as a log line or an error message.
///
/// Guarantees:
/// - Matching is on UTF-8 bytes: a secret is masked wherever its bytes occur, whatever follows
///   it (a combining mark directly after a secret does not hide it). Overlapping or nested
///   secrets are masked as one run; the bytes around them are kept.
/// - Encoded forms are masked too (``SecretForms``): percent-encoded in any spelling (and form
///   encoding's `+` for a space), base64 and base64url at any offset inside a longer base64
///   value (a `Basic` credential's `user:secret`), padded or not. Callers register a secret once,
///   never its encodings.
/// - Values shorter than ``minimumLength`` (4 bytes) are never masked; the configuration refuses
///   such secrets when it resolves them (`SecretSource`), so none is in use unmasked.
/// - Configured secrets (``register(_:)``) are kept for the life of the process. Issued
///   credentials (``registerTokens(_:)``: access and refresh tokens, fetched bearer tokens, secrets
///   a command produced) are kept while they are among the ``tokenCapacity`` most recently
///   registered or used: a current token is registered again each time it is used, so only
///   long-replaced tokens are forgotten, and memory stays bounded however many were issued.
/// - The cost of ``redact(_:)`` is one pass over the text's bytes (``SecretMatcher``), whatever
///   the number of registered values, and a second one over its percent-decoded view when it
///   has a `%XX` escape; the matcher is rebuilt when a value is added or dropped,
///   at registration, never while redacting.
public final class Redactor: Sendable {
    /// The process-wide redactor used by the logger and by error descriptions.
    public static let shared = Redactor()

    /// The replacement text for a secret.
    public static let mask = "[REDACTED]"

    /// The shortest value masked, in UTF-8 bytes.
    public static let minimumSecretLength = 4

    /// Values shorter than this (in UTF-8 bytes) are ignored.
    public let minimumLength: Int
    /// How many issued credentials are kept (the most recently registered or used).
    public let tokenCapacity: Int

    private struct Registry {
        /// Configured secrets, kept for the life of the process.
        var secrets: Set<[UInt8]> = []
        /// Issued credentials with the tick of their last registration.
        var tokens: [[UInt8]: UInt64] = [:]
        var tick: UInt64 = 0
        /// The matcher for exactly `secrets` and `tokens` as of the last rebuild.
        var matcher = SecretMatcher(secrets: [])
        /// Whether `secrets` or `tokens` changed and the matching matcher is not published yet.
        var pending = false

        var patterns: [[UInt8]] { Array(secrets) + tokens.keys.filter { !secrets.contains($0) } }
    }

    /// Guarded by the mutex: what is registered and the matcher built from it.
    private let registry = Mutex(Registry())
    /// Serialises rebuilds so that matchers are published in registration order and a
    /// registration returns only once its value is masked. `redact(_:)` never takes it.
    private let rebuild = Mutex(())

    public init(minimumLength: Int = Redactor.minimumSecretLength, tokenCapacity: Int = 1024) {
        self.minimumLength = max(1, minimumLength)
        self.tokenCapacity = max(1, tokenCapacity)
    }

    /// Registers a configured secret (its encoded forms follow: ``SecretForms``); it is masked in
    /// every later ``redact(_:)`` call, for the life of the process.
    public func register(_ secret: String) {
        let bytes = Array(secret.utf8)
        guard bytes.count >= minimumLength else { return }
        if registry.withLock({ !$0.pending && $0.secrets.contains(bytes) }) { return }
        update { registry in registry.secrets.insert(bytes).inserted }
    }

    /// Registers issued credentials (tokens; their encoded forms follow); registering a value that
    /// is already known only marks it as recently used.
    public func registerTokens(_ tokens: [String]) {
        let values = tokens.map { Array($0.utf8) }.filter { $0.count >= minimumLength }
        guard !values.isEmpty else { return }
        let known = registry.withLock { registry in
            guard !registry.pending,
                values.allSatisfy({ registry.tokens[$0] != nil || registry.secrets.contains($0) })
            else {
                return false
            }
            for value in values where registry.tokens[value] != nil {
                registry.tick += 1
                registry.tokens[value] = registry.tick
            }
            return true
        }
        if known { return }
        update { registry in
            var changed = false
            for value in values where !registry.secrets.contains(value) {
                registry.tick += 1
                if registry.tokens.updateValue(registry.tick, forKey: value) == nil { changed = true }
            }
            while registry.tokens.count > tokenCapacity, let oldest = registry.tokens.min(by: { $0.value < $1.value }) {
                registry.tokens[oldest.key] = nil
            }
            return changed
        }
    }

    /// Registers one issued credential (see ``registerTokens(_:)``).
    public func registerToken(_ token: String) { registerTokens([token]) }

    /// Applies `change` to the registry and, when it changed what is registered, publishes a
    /// matcher built (outside the registry's lock) from the new contents.
    private func update(_ change: (inout Registry) -> Bool) {
        rebuild.withLock { _ in
            let patterns: [[UInt8]]? = registry.withLock { registry in
                guard change(&registry) else { return nil }
                registry.pending = true
                return registry.patterns
            }
            guard let patterns else { return }
            let matcher = SecretMatcher(secrets: patterns)
            registry.withLock { registry in
                registry.matcher = matcher
                registry.pending = false
            }
        }
    }

    /// Whether any secret has been registered.
    public var isEmpty: Bool { registry.withLock { $0.matcher.isEmpty } }

    /// How many values are registered (configured secrets and kept tokens).
    public var count: Int { registry.withLock { $0.secrets.count + $0.tokens.count } }

    /// Returns `bytes` with every run of registered secrets replaced by ``mask`` (the bytes
    /// around them are kept as they are, whatever they encode).
    public func redact(bytes: [UInt8]) -> [UInt8] {
        let matcher = registry.withLock { $0.matcher }
        guard !matcher.isEmpty else { return bytes }
        return bytes.withUnsafeBufferPointer { Self.masking(matcher.matches(in: $0), in: $0) } ?? bytes
    }

    /// Masks a stream's bytes as they come (`tokenrelay exec`'s responses): returns the masked
    /// bytes of `bytes` that may go out now, and how many of `bytes` they stand for; the rest is
    /// kept back by the caller and given again, with what follows, next time. What goes out ends
    /// at the last line feed (no secret form holds one, so no secret can span it), or, without
    /// one in the last `window` bytes, `window` bytes before the end and never inside a secret:
    /// a secret split between two chunks is masked whole. With `final`, everything goes out.
    public func redact(stream bytes: [UInt8], window: Int, final: Bool) -> (masked: [UInt8], consumed: Int) {
        let matcher = registry.withLock { $0.matcher }
        var cut = bytes.count
        if !final {
            let lastLine = bytes.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
            cut = max(lastLine, bytes.count - window)
        }
        guard !matcher.isEmpty else { return (Array(bytes[..<cut]), cut) }
        return bytes.withUnsafeBufferPointer { buffer in
            let runs = matcher.matches(in: buffer)
            // A run across the cut (a secret's widened form) goes out whole next time.
            if let crossing = runs.first(where: { $0.lowerBound < cut && $0.upperBound > cut }) {
                cut = crossing.lowerBound
            }
            let head = UnsafeBufferPointer(rebasing: buffer[..<cut])
            let inside = runs.filter { $0.upperBound <= cut }
            return (Self.masking(inside, in: head) ?? Array(head), cut)
        }
    }

    /// Returns `text` with every run of registered secrets replaced by ``mask``.
    public func redact(_ text: String) -> String {
        let matcher = registry.withLock { $0.matcher }
        guard !matcher.isEmpty else { return text }
        var text = text
        return text.withUTF8 { bytes in
            Self.masking(matcher.matches(in: bytes), in: bytes).map { String(decoding: $0, as: UTF8.self) }
        } ?? text
    }

    /// `bytes` with each of `runs` replaced by ``mask``; `nil` when there is none (nothing to copy).
    private static func masking(_ runs: [Range<Int>], in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard !runs.isEmpty else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var position = 0
        for run in runs {
            output.append(contentsOf: bytes[position..<run.lowerBound])
            output.append(contentsOf: Redactor.mask.utf8)
            position = run.upperBound
        }
        output.append(contentsOf: bytes[position...])
        return output
    }
}
