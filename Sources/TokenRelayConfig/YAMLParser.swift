/// Parses YAML text into one ``YAMLNode`` tree: anchors and aliases resolved (an undefined alias
/// is an error), `<<` merge keys applied (explicit keys win; in a list of maps, earlier maps win),
/// one document only, nesting and alias expansion bounded.
public struct YAMLParser: Sendable {
    /// At most this many nodes once aliases are expanded (an "alias bomb" is refused).
    public var maxExpandedNodes: Int
    /// At most this many nested collections.
    public var maxDepth: Int

    public init(maxExpandedNodes: Int = 100_000, maxDepth: Int = 200) {
        self.maxExpandedNodes = maxExpandedNodes
        self.maxDepth = maxDepth
    }

    /// Parses `text`. Returns `nil` for an empty document (no content, or comments only).
    public func parse(_ text: String) throws(YAMLError) -> YAMLNode? {
        try parse(bytes: Array(text.utf8))
    }

    /// Parses UTF-8 (or UTF-16 with a BOM, as libyaml detects) `bytes`.
    public func parse(bytes: [UInt8]) throws(YAMLError) -> YAMLNode? {
        var builder = TreeBuilder(limits: self)
        try YAMLEventReader.read(bytes) { (event) throws(YAMLError) in try builder.consume(event) }
        return builder.root
    }
}

/// Builds the tree from events as they arrive, with an explicit stack (no recursion, so depth
/// cannot overflow). The children of every open collection wait in one flat list, `children`;
/// a frame remembers where its children start, and its end event turns them into its node.
private struct TreeBuilder {
    let limits: YAMLParser
    var anchors: [String: YAMLNode] = [:]
    var expandedNodes = 0
    var documents = 0
    /// The document's node, once its outermost node ends.
    var root: YAMLNode?

    /// An open sequence or mapping.
    struct Frame {
        var isMapping: Bool
        var anchor: String?
        var tag: String?
        var mark: SourceMark
        /// Where its children start in `children` (a mapping's alternate key, value).
        var start: Int
    }
    var stack: [Frame] = []
    var children: [YAMLNode] = []

    init(limits: YAMLParser) { self.limits = limits }

    mutating func consume(_ event: YAMLEvent) throws(YAMLError) {
        switch event {
        case .streamStart, .streamEnd, .documentEnd:
            return
        case .documentStart(let mark):
            documents += 1
            if documents > 1 {
                throw YAMLError(
                    message:
                        "a second YAML document starts here; the config must be a single document (remove the '---' separator)",
                    mark: mark)
            }
        case .alias(let anchor, let mark):
            guard let node = anchors[anchor] else {
                throw YAMLError(
                    message: "undefined alias '*\(anchor)': define '&\(anchor)' before using it", mark: mark)
            }
            try count(node.size, at: mark)
            attach(node)
        case .scalar(let value, let style, let anchor, let tag, let mark):
            try count(1, at: mark)
            let node = YAMLNode(
                content: .scalar(YAMLScalar(value: value, style: style)), mark: mark, tag: resolved(tag), size: 1)
            if let anchor { anchors[anchor] = node }
            attach(node)
        case .sequenceStart(let anchor, let tag, let mark):
            try push(Frame(isMapping: false, anchor: anchor, tag: resolved(tag), mark: mark, start: children.count))
        case .mappingStart(let anchor, let tag, let mark):
            try push(Frame(isMapping: true, anchor: anchor, tag: resolved(tag), mark: mark, start: children.count))
        case .sequenceEnd, .mappingEnd:
            guard let frame = stack.popLast() else { return }
            let node: YAMLNode
            if frame.isMapping {
                var pairs: [YAMLPair] = []
                pairs.reserveCapacity((children.count - frame.start) / 2)
                var index = frame.start
                while index + 1 < children.count {
                    pairs.append(YAMLPair(key: children[index], value: children[index + 1]))
                    index += 2
                }
                children.removeSubrange(frame.start...)
                let merged = try applyMerges(pairs)
                let size = 1 + merged.reduce(0) { $0 + $1.key.size + $1.value.size }
                node = YAMLNode(content: .mapping(merged), mark: frame.mark, tag: frame.tag, size: size)
            } else {
                let items = Array(children[frame.start...])
                children.removeSubrange(frame.start...)
                node = YAMLNode(
                    content: .sequence(items), mark: frame.mark, tag: frame.tag,
                    size: 1 + items.reduce(0) { $0 + $1.size })
            }
            if let anchor = frame.anchor { anchors[anchor] = node }
            attach(node)
        }
    }

    /// A finished node goes to the open collection, or is the document's root.
    private mutating func attach(_ node: YAMLNode) {
        if stack.isEmpty {
            root = node
        } else {
            children.append(node)
        }
    }

    /// Expands the `!!x` shorthand libyaml already resolves to `tag:yaml.org,2002:x`; keeps others.
    private func resolved(_ tag: String?) -> String? {
        guard let tag, tag != "!" else { return nil }
        return tag
    }

    private mutating func count(_ nodes: Int, at mark: SourceMark) throws(YAMLError) {
        expandedNodes += nodes
        if expandedNodes > limits.maxExpandedNodes {
            throw YAMLError(
                message:
                    "the document expands to more than \(limits.maxExpandedNodes) nodes through aliases; refusing it (alias bomb?)",
                mark: mark)
        }
    }

    private mutating func push(_ frame: Frame) throws(YAMLError) {
        try count(1, at: frame.mark)
        guard stack.count < limits.maxDepth else {
            throw YAMLError(message: "nesting deeper than \(limits.maxDepth) levels", mark: frame.mark)
        }
        stack.append(frame)
    }

    /// Replaces each `<<` pair with the pairs of the mapping(s) it names, skipping keys the
    /// mapping sets explicitly and keys an earlier merge already supplied.
    private mutating func applyMerges(_ pairs: [YAMLPair]) throws(YAMLError) -> [YAMLPair] {
        func isMerge(_ key: YAMLNode) -> Bool {
            guard let scalar = key.scalar, scalar.value == "<<" else { return false }
            return key.tag == YAMLNode.mergeTag || (key.tag == nil && scalar.style == .plain)
        }
        guard pairs.contains(where: { isMerge($0.key) }) else { return pairs }
        var taken = Set(pairs.compactMap { isMerge($0.key) ? nil : $0.key.scalar?.value })
        var result: [YAMLPair] = []
        for pair in pairs {
            guard isMerge(pair.key) else {
                result.append(pair)
                continue
            }
            let sources: [YAMLNode]
            switch pair.value.content {
            case .mapping: sources = [pair.value]
            case .sequence(let items): sources = items
            case .scalar:
                throw YAMLError(
                    message:
                        "the merge key '<<' needs a mapping or a list of mappings (usually an alias like *defaults)",
                    mark: pair.value.mark)
            }
            for source in sources {
                guard let merged = source.pairs else {
                    throw YAMLError(
                        message:
                            "the merge key '<<' needs a mapping or a list of mappings; this item is \(source.kindDescription)",
                        mark: source.mark)
                }
                for entry in merged {
                    if let name = entry.key.scalar?.value {
                        if taken.contains(name) { continue }
                        taken.insert(name)
                    }
                    try count(entry.key.size + entry.value.size, at: pair.key.mark)
                    result.append(entry)
                }
            }
        }
        return result
    }
}
