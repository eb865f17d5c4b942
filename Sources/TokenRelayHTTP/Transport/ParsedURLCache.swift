import Synchronization

/// The URLs one environment's requests parsed last, so a caller that sends the same URL again
/// (a poller, an editor refreshing a view) does not pay libcurl's parse each time (the largest
/// single cost of building a request: scripts/bench.d/FINDINGS.md §8). A parse is a pure function of its text (every
/// part of a ``ParsedURL`` follows from it, and libcurl only reads a handle given to a
/// transfer), so a hit is exactly what a fresh parse would give. Refusals are not kept. Bounded
/// in count (emptied when full) and in size (a URL longer than `maximumLength` bytes is parsed
/// but not kept: a caller cannot make it hold megabytes). In memory only; it holds what the
/// callers' own params held.
public final class ParsedURLCache: Sendable {
    private let entries = Mutex<[String: ParsedURL]>([:])
    /// How many URLs it keeps at most.
    public let capacity: Int
    /// The longest URL it keeps, in UTF-8 bytes.
    public let maximumLength: Int

    public init(capacity: Int = 64, maximumLength: Int = 2048) {
        self.capacity = max(1, capacity)
        self.maximumLength = maximumLength
    }

    /// `text` parsed: the kept parse when there is one, else a fresh one (kept if short enough).
    public func parse(_ text: String) throws(URLProblem) -> ParsedURL {
        guard text.utf8.count <= maximumLength else { return try ParsedURL(text) }
        if let kept = entries.withLock({ $0[text] }) { return kept }
        let parsed = try ParsedURL(text)
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[text] = parsed
        }
        return parsed
    }

    /// How many URLs it holds now (for tests).
    var count: Int { entries.withLock { $0.count } }
}
