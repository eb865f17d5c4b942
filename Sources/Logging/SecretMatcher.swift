/// Finds every occurrence of a set of byte strings in one pass over a text (Aho–Corasick).
///
/// The automaton is built over each pattern's *key*, its last ``keyLength`` bytes (the whole
/// pattern when shorter): keys keep the automaton small however long the patterns are (a JWT
/// is a kilobyte), and the random tail of a token tells tokens apart where their common header
/// would not. Where a key ends in the text, the patterns with that key are compared in full.
/// Transitions are a dense table over byte classes (bytes that occur in no key share class 0,
/// which always leads back to the root), so each text byte costs one table lookup.
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
    /// `transitions[state * classCount + class]`: the next state.
    private let transitions: [Int32]
    /// The key ending at each state, or -1.
    private let keyAt: [Int32]
    /// The nearest proper suffix state at which a key ends, or -1.
    private let outputLink: [Int32]

    /// Whether there is no pattern.
    public var isEmpty: Bool { patterns.isEmpty }

    /// A matcher for `patterns` (empty patterns are ignored).
    public init(patterns: [[UInt8]]) {
        let patterns = patterns.filter { !$0.isEmpty }
        self.patterns = patterns

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

        // The trie of keys (sparse while building).
        var children: [[Int32: Int32]] = [[:]]
        var keyAt: [Int32] = [-1]
        for (index, key) in keys.enumerated() {
            var state = 0
            for byte in key {
                let symbol = byteClass[Int(byte)]
                if let next = children[state][symbol] {
                    state = Int(next)
                } else {
                    children.append([:])
                    keyAt.append(-1)
                    children[state][symbol] = Int32(children.count - 1)
                    state = children.count - 1
                }
            }
            keyAt[state] = Int32(index)
        }

        // Failure links by breadth-first search, folded into the dense table.
        let stateCount = children.count
        var transitions = [Int32](repeating: 0, count: stateCount * classCount)
        var failure = [Int32](repeating: 0, count: stateCount)
        var outputLink = [Int32](repeating: -1, count: stateCount)
        var queue: [Int32] = []
        queue.reserveCapacity(stateCount)
        for symbol in 1..<max(1, classCount) {
            if let child = children[0][Int32(symbol)] {
                transitions[symbol] = child
                queue.append(child)
            }
        }
        var head = 0
        while head < queue.count {
            let state = Int(queue[head])
            head += 1
            let fail = Int(failure[state])
            outputLink[state] = keyAt[fail] >= 0 ? Int32(fail) : outputLink[fail]
            for symbol in 1..<classCount {
                let fallback = transitions[fail * classCount + symbol]
                if let child = children[state][Int32(symbol)] {
                    transitions[state * classCount + symbol] = child
                    failure[Int(child)] = fallback
                    queue.append(child)
                } else {
                    transitions[state * classCount + symbol] = fallback
                }
            }
        }
        self.transitions = transitions
        self.keyAt = keyAt
        self.outputLink = outputLink
    }

    /// The byte ranges of `text` covered by occurrences of the patterns, merged where they
    /// overlap, in order. Empty when there is none.
    public func matches(in text: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        guard !patterns.isEmpty else { return [] }
        var found: [Range<Int>] = []
        var state = 0
        for position in 0..<text.count {
            state = Int(transitions[state * classCount + Int(byteClass[Int(text[position])])])
            var output = keyAt[state] >= 0 ? Int32(state) : outputLink[state]
            while output >= 0 {
                let end = position + 1
                for candidate in candidates[Int(keyAt[Int(output)])] {
                    let pattern = patterns[Int(candidate)]
                    let start = end - pattern.count
                    if start >= 0, Self.equal(text, from: start, pattern) { found.append(start..<end) }
                }
                output = outputLink[Int(output)]
            }
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

    private static func equal(_ text: UnsafeBufferPointer<UInt8>, from start: Int, _ pattern: [UInt8]) -> Bool {
        var index = 0
        while index < pattern.count {
            if text[start + index] != pattern[index] { return false }
            index += 1
        }
        return true
    }
}
