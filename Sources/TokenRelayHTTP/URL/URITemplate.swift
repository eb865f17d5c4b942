/// A variable's value for ``URITemplate`` expansion. An empty list or associative array is
/// "undefined" (RFC 6570 §2.3), as is a variable absent from the dictionary.
public enum URITemplateValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    case string(String)
    case list([String])
    /// Name/value pairs in order.
    case associative([(String, String)])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: String...) { self = .list(elements) }
    public init(dictionaryLiteral elements: (String, String)...) { self = .associative(elements) }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): a == b
        case (.list(let a), .list(let b)): a == b
        case (.associative(let a), .associative(let b)): a.elementsEqual(b) { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }
}

/// Why a template could not be parsed or expanded. Offsets count UTF-8 bytes from 0.
public enum URITemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    case unterminatedExpression(offset: Int)
    case unexpectedClosingBrace(offset: Int)
    case emptyExpression(offset: Int)
    /// `=`, `,`, `!`, `@`, `|` are reserved for future extensions.
    case reservedOperator(String, offset: Int)
    case invalidVariableName(String, offset: Int)
    case invalidPrefix(String, offset: Int)
    /// A `:n` prefix on a list or associative value.
    case prefixOnCompositeValue(variable: String)

    public var description: String {
        switch self {
        case .unterminatedExpression(let offset): "template expression at offset \(offset) has no closing brace"
        case .unexpectedClosingBrace(let offset): "unexpected '}' at offset \(offset)"
        case .emptyExpression(let offset): "empty template expression at offset \(offset)"
        case .reservedOperator(let op, let offset): "unsupported operator '\(op)' at offset \(offset)"
        case .invalidVariableName(let name, let offset): "invalid variable name '\(name)' at offset \(offset)"
        case .invalidPrefix(let text, let offset): "invalid prefix length '\(text)' at offset \(offset)"
        case .prefixOnCompositeValue(let name): "prefix modifier on list or associative variable '\(name)'"
        }
    }
}

/// An RFC 6570 URI template (levels 1 to 4: all operators, lists, associative arrays, prefix
/// and explode modifiers), parsed once, expanded with percent-encoding exactly per the RFC.
public struct URITemplate: Sendable, Equatable {
    struct VariableSpec: Sendable, Equatable {
        var name: String
        var prefix: Int?
        var explode: Bool
    }

    struct Operator: Sendable, Equatable {
        var first: String
        var separator: String
        var named: Bool
        var ifEmpty: String
        var allowReserved: Bool

        static func from(_ byte: UInt8?) -> Operator? {
            switch byte {
            case nil: Operator(first: "", separator: ",", named: false, ifEmpty: "", allowReserved: false)
            case UInt8(ascii: "+"): Operator(first: "", separator: ",", named: false, ifEmpty: "", allowReserved: true)
            case UInt8(ascii: "#"): Operator(first: "#", separator: ",", named: false, ifEmpty: "", allowReserved: true)
            case UInt8(ascii: "."):
                Operator(first: ".", separator: ".", named: false, ifEmpty: "", allowReserved: false)
            case UInt8(ascii: "/"):
                Operator(first: "/", separator: "/", named: false, ifEmpty: "", allowReserved: false)
            case UInt8(ascii: ";"): Operator(first: ";", separator: ";", named: true, ifEmpty: "", allowReserved: false)
            case UInt8(ascii: "?"):
                Operator(first: "?", separator: "&", named: true, ifEmpty: "=", allowReserved: false)
            case UInt8(ascii: "&"):
                Operator(first: "&", separator: "&", named: true, ifEmpty: "=", allowReserved: false)
            default: nil
            }
        }
    }

    enum Part: Sendable, Equatable {
        case literal(String)
        case expression(Operator, [VariableSpec])
    }

    /// The template text.
    public let template: String
    let parts: [Part]

    /// Parses `template`; throws ``URITemplateError`` when it is malformed.
    public init(_ template: String) throws(URITemplateError) {
        self.template = template
        self.parts = try Self.parse(Array(template.utf8))
    }

    /// Parses and expands in one step.
    public static func expand(_ template: String, variables: [String: URITemplateValue]) throws(URITemplateError)
        -> String
    {
        try URITemplate(template).expand(variables: variables)
    }

    /// The names of every variable the template uses, in order of appearance.
    public var variableNames: [String] {
        parts.flatMap { part -> [String] in
            if case .expression(_, let specs) = part { return specs.map(\.name) }
            return []
        }
    }

    /// Expands the template. Absent variables (and empty lists) expand to nothing.
    public func expand(variables: [String: URITemplateValue]) throws(URITemplateError) -> String {
        var output: [UInt8] = []
        for part in parts {
            switch part {
            case .literal(let text): output.append(contentsOf: text.utf8)
            case .expression(let op, let specs): try Self.expand(op, specs, variables, into: &output)
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
