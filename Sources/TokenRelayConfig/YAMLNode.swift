/// A 1-based line and column in the config file.
public struct SourceMark: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 1-based line; 0 when the problem concerns the whole file.
    public var line: Int
    /// 1-based column (in characters); 0 when the problem concerns the whole file.
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// A mark for problems that concern the whole file rather than a place in it.
    public static let file = SourceMark(line: 0, column: 0)

    public static func < (lhs: SourceMark, rhs: SourceMark) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }

    public var description: String { "\(line):\(column)" }
}

/// How a scalar was written. The style decides typing: a quoted `"30"` is a string, a plain `30`
/// an integer.
public enum ScalarStyle: Sendable, Hashable {
    case plain, singleQuoted, doubleQuoted, literal, folded

    /// Whether the scalar was written in a style that always means a string.
    public var isQuotedOrBlock: Bool { self != .plain }
}

/// One parser event, copied out of libyaml by ``YAMLEventReader``.
enum YAMLEvent: Sendable {
    case streamStart
    case streamEnd
    case documentStart(SourceMark)
    case documentEnd
    case alias(anchor: String, mark: SourceMark)
    case scalar(value: String, style: ScalarStyle, anchor: String?, tag: String?, mark: SourceMark)
    case sequenceStart(anchor: String?, tag: String?, mark: SourceMark)
    case sequenceEnd
    case mappingStart(anchor: String?, tag: String?, mark: SourceMark)
    case mappingEnd
}

/// A YAML syntax or structure error at a mark, with a message meant for the person editing the file.
public struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, with a hint where one helps.
    public var message: String
    /// Where it went wrong.
    public var mark: SourceMark

    public init(message: String, mark: SourceMark) {
        self.message = message
        self.mark = mark
    }

    public var description: String { "\(mark): \(message)" }

    /// Turns libyaml's terse problem text into a helpful message.
    static func fromParser(problem: String, context: String?, mark: SourceMark, byteAtMark: UInt8?) -> YAMLError {
        var message = "invalid YAML: " + problem
        if let context { message += " (\(context))" }
        if byteAtMark == UInt8(ascii: "\t") || problem.contains("tab") {
            message += "; YAML does not allow tabs for indentation: indent with spaces"
        } else if problem.contains("mapping values are not allowed") {
            message += "; check the indentation of this line, or quote a value that contains ': '"
        } else if problem.contains("did not find expected key") || problem.contains("did not find expected '-'") {
            message += "; check that this line is indented like its siblings"
        } else if problem.contains("could not find expected ':'") {
            message += "; a key needs a ':' after it"
        } else if problem.contains("found undefined tag handle") || problem.contains("found unexpected end of stream") {
            message += "; check for an unclosed quote or bracket"
        }
        return YAMLError(message: message, mark: mark)
    }
}

/// A scalar's text and the style it was written in.
public struct YAMLScalar: Sendable, Hashable {
    /// The scalar's text (escapes and folding already applied).
    public var value: String
    /// How it was written.
    public var style: ScalarStyle

    public init(value: String, style: ScalarStyle) {
        self.value = value
        self.style = style
    }
}

/// A key/value pair of a mapping, in file order.
public struct YAMLPair: Sendable {
    public var key: YAMLNode
    public var value: YAMLNode
}

/// A node of the YAML tree: aliases already expanded and `<<` merges applied. Every node keeps
/// the mark where it starts (where an alias was expanded, the anchored node's mark).
public struct YAMLNode: Sendable {
    /// The node's content.
    public enum Content: Sendable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        case mapping([YAMLPair])
    }

    /// What the node holds.
    public var content: Content
    /// Where the node starts.
    public var mark: SourceMark
    /// The node's resolved tag (`tag:yaml.org,2002:str` for `!!str`), if one was written.
    public var tag: String?
    /// How many nodes this subtree counts, aliases expanded (used to bound alias bombs).
    var size: Int

    init(content: Content, mark: SourceMark, tag: String?, size: Int) {
        self.content = content
        self.mark = mark
        self.tag = tag
        self.size = size
    }

    /// The scalar, if this node is one.
    public var scalar: YAMLScalar? {
        if case .scalar(let scalar) = content { return scalar }
        return nil
    }

    /// The pairs, if this node is a mapping.
    public var pairs: [YAMLPair]? {
        if case .mapping(let pairs) = content { return pairs }
        return nil
    }

    /// The items, if this node is a sequence.
    public var items: [YAMLNode]? {
        if case .sequence(let items) = content { return items }
        return nil
    }

    /// The value of the first pair whose key is the scalar `key`.
    public subscript(key: String) -> YAMLNode? {
        pairs?.first { $0.key.scalar?.value == key }?.value
    }

    /// Whether this is a null scalar (`~`, `null`, empty plain scalar, or tagged `!!null`).
    public var isNull: Bool {
        guard let scalar else { return false }
        if tag == YAMLNode.nullTag { return true }
        guard tag == nil, scalar.style == .plain else { return false }
        switch scalar.value {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }

    /// A short name of the node's kind for messages ("a mapping", "a list", "a string").
    public var kindDescription: String {
        switch content {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .scalar: return isNull ? "nothing (null)" : "a scalar"
        }
    }

    static let stringTag = "tag:yaml.org,2002:str"
    static let intTag = "tag:yaml.org,2002:int"
    static let boolTag = "tag:yaml.org,2002:bool"
    static let nullTag = "tag:yaml.org,2002:null"
    static let floatTag = "tag:yaml.org,2002:float"
    static let mergeTag = "tag:yaml.org,2002:merge"
}
