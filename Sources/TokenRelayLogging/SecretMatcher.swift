/// Finds every occurrence of a set of byte strings in one pass over a text (Aho–Corasick).
///
/// The automaton is built over each pattern's *key*, its last ``keyLength`` bytes (the whole
/// pattern when shorter): keys keep the automaton small however long the patterns are (a JWT
/// is a kilobyte), and the random tail of a token tells tokens apart where their common header
/// would not. Where a key ends in the text, the patterns with that key are compared in full.
/// Transitions are a dense table over byte classes (bytes that occur in no key share class 0,
/// which always leads back to the root), so each text byte costs one table lookup; building it
/// is linear in the total key length times the number of classes.
///
/// A matcher built from ``SecretForms`` (``init(forms:)``, what the ``Redactor`` uses) also
/// widens a base64 middle's match over the neighbouring base64 characters that carry bits of
/// the secret, and runs over the text's percent-decoded view as well.
///
/// Immutable once built; safe to share between threads.
public final class SecretMatcher: Sendable {
    /// The bytes of each pattern the automaton is built over.
    public static let keyLength = 8

    /// The patterns, by index.
    private let patterns: [[UInt8]]
    /// For each key, the indices of the patterns that end with it.
    private let candidates: [[Int32]]
    /// The byte class of each byte value.
    private let byteClass: [Int32]
    /// The number of classes (row width of `transitions`).
    private let classCount: Int
    /// `transitions[state * classCount + class]`: the next state, as `~state` when a key ends there.
    private let transitions: [Int32]
    /// The key ending at each state, or -1.
    private let keyAt: [Int32]
    /// The nearest proper suffix state at which a key ends, or -1.
    private let outputLink: [Int32]
    /// For each pattern, how many base64 characters a match is widened by on each side; empty:
    /// never.
    private let widening: [(left: UInt8, right: UInt8)]
    /// Whether the text's percent-decoded view is searched too.
    private let decodesPercent: Bool

    /// Whether there is no pattern.
    public var isEmpty: Bool { patterns.isEmpty }

    /// A matcher for exactly `patterns` (empty patterns are ignored).
    public convenience init(patterns: [[UInt8]]) {
        self.init(patterns: patterns.filter { !$0.isEmpty }, widening: [], decodesPercent: false)
    }

    /// A matcher for each of `secrets` in every form ``SecretForms`` lists, and in the text's
    /// percent-decoded view.
    convenience init(secrets: [[UInt8]]) {
        var seen: Set<[UInt8]> = []
        var patterns: [[UInt8]] = []
        var widening: [(left: UInt8, right: UInt8)] = []
        for secret in secrets where !secret.isEmpty {
            for form in SecretForms.forms(of: secret) where seen.insert(form.bytes).inserted {
                patterns.append(form.bytes)
                widening.append((form.widenLeft, form.widenRight))
            }
        }
        self.init(patterns: patterns, widening: widening, decodesPercent: true)
    }

    private init(patterns: [[UInt8]], widening: [(left: UInt8, right: UInt8)], decodesPercent: Bool) {
        self.patterns = patterns
        self.widening = widening
        self.decodesPercent = decodesPercent

        // Keys, and the patterns behind each.
        var keyIndex: [[UInt8]: Int] = [:]
        var keys: [[UInt8]] = []
        var candidates: [[Int32]] = []
        for (index, pattern) in patterns.enumerated() {
            let key = Array(pattern.suffix(Self.keyLength))
            if let existing = keyIndex[key] {
                candidates[existing].append(Int32(index))
            } else {
                keyIndex[key] = keys.count
                keys.append(key)
                candidates.append([Int32(index)])
            }
        }
        self.candidates = candidates

        // Byte classes: 0 for bytes in no key.
        var byteClass = [Int32](repeating: 0, count: 256)
        var classCount = 1
        for key in keys {
            for byte in key where byteClass[Int(byte)] == 0 {
                byteClass[Int(byte)] = Int32(classCount)
                classCount += 1
            }
        }
        self.byteClass = byteClass
        self.classCount = classCount

        // The trie of keys, written straight into the dense table (0 = no child yet: the root
        // is never a child), then completed breadth-first with the failure transitions.
        let bound = keys.reduce(1) { $0 + $1.count }
        var transitions = [Int32](repeating: 0, count: bound * classCount)
        var keyAt = [Int32](repeating: -1, count: bound)
        var stateCount = 1
        for (index, key) in keys.enumerated() {
            var state = 0
            for byte in key {
                let slot = state * classCount + Int(byteClass[Int(byte)])
                if transitions[slot] == 0 {
                    transitions[slot] = Int32(stateCount)
                    stateCount += 1
                }
                state = Int(transitions[slot])
            }
            keyAt[state] = Int32(index)
        }
        transitions.removeLast((bound - stateCount) * classCount)
        keyAt.removeLast(bound - stateCount)

        var failure = [Int32](repeating: 0, count: stateCount)
        var outputLink = [Int32](repeating: -1, count: stateCount)
        var queue: [Int32] = []
        queue.reserveCapacity(stateCount)
        for symbol in 1..<classCount where transitions[symbol] != 0 { queue.append(transitions[symbol]) }
        var head = 0
        while head < queue.count {
            let state = Int(queue[head])
            head += 1
            let fail = Int(failure[state])
            outputLink[state] = keyAt[fail] >= 0 ? Int32(fail) : outputLink[fail]
            for symbol in 1..<classCount {
                let slot = state * classCount + symbol
                let fallback = transitions[fail * classCount + symbol]
                let child = transitions[slot]
                if child != 0 {
                    failure[Int(child)] = fallback
                    queue.append(child)
                } else {
                    transitions[slot] = fallback
                }
            }
        }
        // A state where some key ends is stored negated (as ~state), so the scan tests one sign.
        for slot in transitions.indices {
            let target = Int(transitions[slot])
            if keyAt[target] >= 0 || outputLink[target] >= 0 { transitions[slot] = ~transitions[slot] }
        }
        self.transitions = transitions
        self.keyAt = keyAt
        self.outputLink = outputLink
    }

    /// The byte ranges of `text` covered by occurrences of the patterns (widened, and found in
    /// the percent-decoded view, for a matcher of secrets), merged where they overlap, in order.
    /// Empty when there is none.
    public func matches(in text: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        guard !patterns.isEmpty else { return [] }
        var found = occurrences(in: text)
        if decodesPercent, let view = SecretForms.percentDecoded(text) {
            let decoded = view.bytes.withUnsafeBufferPointer { occurrences(in: $0) }
            for range in decoded { found.append(view.origins[range.lowerBound]..<view.origins[range.upperBound]) }
        }
        guard found.count > 1 else { return found }
        found.sort { $0.lowerBound < $1.lowerBound }
        var merged: [Range<Int>] = [found[0]]
        for range in found.dropFirst() {
            let last = merged[merged.count - 1]
            if range.lowerBound < last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// Every occurrence in `text` (widened), unmerged and unordered.
    private func occurrences(in text: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        var found: [Range<Int>] = []
        let width = classCount
        transitions.withUnsafeBufferPointer { table in
            byteClass.withUnsafeBufferPointer { classes in
                var state = 0
                for position in 0..<text.count {
                    let next = table[state * width + Int(classes[Int(text[position])])]
                    guard next < 0 else {
                        state = Int(next)
                        continue
                    }
                    state = Int(~next)
                    collect(endingAt: position + 1, state: state, in: text, into: &found)
                }
            }
        }
        return found
    }

    /// Appends the occurrences of the patterns whose keys end at `state`, for the text up to `end`.
    private func collect(
        endingAt end: Int, state: Int, in text: UnsafeBufferPointer<UInt8>, into found: inout [Range<Int>]
    ) {
        var output = keyAt[state] >= 0 ? Int32(state) : outputLink[state]
        while output >= 0 {
            for candidate in candidates[Int(keyAt[Int(output)])] {
                let pattern = patterns[Int(candidate)]
                let start = end - pattern.count
                if start >= 0, Self.equal(text, from: start, pattern) {
                    found.append(widened(start..<end, pattern: Int(candidate), in: text))
                }
            }
            output = outputLink[Int(output)]
        }
    }

    /// `range` widened over the base64 characters around it that the pattern's form says carry
    /// bits of its secret.
    private func widened(_ range: Range<Int>, pattern: Int, in text: UnsafeBufferPointer<UInt8>) -> Range<Int> {
        guard !widening.isEmpty else { return range }
        let (left, right) = widening[pattern]
        var lower = range.lowerBound
        var upper = range.upperBound
        while range.lowerBound - lower < Int(left), lower > 0, SecretForms.isBase64Character(text[lower - 1]) {
            lower -= 1
        }
        while upper - range.upperBound < Int(right), upper < text.count, SecretForms.isBase64Character(text[upper]) {
            upper += 1
        }
        return lower..<upper
    }

    private static func equal(_ text: UnsafeBufferPointer<UInt8>, from start: Int, _ pattern: [UInt8]) -> Bool {
        var index = 0
        while index < pattern.count {
            if text[start + index] != pattern[index] { return false }
            index += 1
        }
        return true
    }
}
