/// A JSON value that round-trips exactly: numbers keep their literal text, so a 20-digit
/// integer (or any other number) comes back byte for byte; objects keep their member order.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A number from an integer.
    public static func int(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }

    /// The member `key` of an object, or `nil` for anything else.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The string payload, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The Boolean payload, if this is a Boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The object payload, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The array payload, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The elements of an array whose elements are all strings; `nil` for anything else.
    public var stringArray: [String]? {
        guard let list = arrayValue else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(list.count)
        for element in list {
            guard let string = element.stringValue else { return nil }
            strings.append(string)
        }
        return strings
    }

    /// The number payload, if this is a number.
    public var numberValue: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The JSON type name (`null`, `boolean`, `number`, `string`, `array`, `object`), for messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// A JSON number kept as its literal text (as parsed, or as formatted from a Swift value).
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The literal, e.g. `12345678901234567890`, `-0.5`, `1e3`.
    public let literal: String

    /// Wraps a literal that is already valid JSON number syntax (the parser guarantees it).
    init(validLiteral: String) { literal = validLiteral }

    public init(_ value: Int) { literal = String(value) }
    public init(_ value: Int64) { literal = String(value) }
    public init(_ value: UInt64) { literal = String(value) }

    /// A number from a finite double; non-finite values become `0` (JSON has no NaN/Infinity).
    public init(_ value: Double) {
        if !value.isFinite {
            literal = "0"
        } else if value == value.rounded(), abs(value) < 1e15 {
            literal = String(Int64(value))
        } else {
            literal = "\(value)"
        }
    }

    /// Parses `text` as a JSON number literal; `nil` if it is not one.
    public init?(literal text: String) {
        guard JSONParser.isNumberLiteral(Array(text.utf8)) else { return nil }
        literal = text
    }

    /// Whether the literal is an integer (no fraction or exponent).
    public var isInteger: Bool { !literal.utf8.contains { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") } }

    /// The value as `Int`, when it is an integer literal that fits.
    public var intValue: Int? { isInteger ? Int(literal) : nil }

    /// The value as `Int64`, when it is an integer literal that fits.
    public var int64Value: Int64? { isInteger ? Int64(literal) : nil }

    /// The value as a double (may round).
    public var doubleValue: Double { Double(literal) ?? 0 }

    public var description: String { literal }
}

/// A JSON object: members in order. Lookup returns the last member with a key, as most
/// parsers do for duplicate keys.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The members in order.
    public private(set) var members: [(key: String, value: JSONValue)]

    public init() { members = [] }
    public init(_ members: [(key: String, value: JSONValue)]) { self.members = members }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = elements.map { (key: $0.0, value: $0.1) }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count
            && lhs.members.elementsEqual(rhs.members) { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for member in members {
            hasher.combine(member.key)
            hasher.combine(member.value)
        }
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }

    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    /// The value of `key`; setting replaces the existing member in place or appends; setting
    /// `nil` removes it.
    public subscript(key: String) -> JSONValue? {
        get {
            for member in members.reversed() where member.key == key { return member.value }
            return nil
        }
        set {
            if let newValue {
                if let index = members.lastIndex(where: { $0.key == key }) {
                    members[index].value = newValue
                } else {
                    members.append((key, newValue))
                }
            } else {
                members.removeAll { $0.key == key }
            }
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(JSONNumber(value)) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { (key: $0.0, value: $0.1) }))
    }
    public init(nilLiteral: ()) { self = .null }
}
