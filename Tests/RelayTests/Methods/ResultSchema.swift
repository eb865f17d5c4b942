import TokenRelayJSONRPC

/// Checks a method's result value against the OpenRPC schema its method declares, so a result
/// type and its schema cannot drift apart: every member the value has is declared, every
/// required one is present, and nested objects and array items agree as well.
enum ResultSchema {
    /// What disagrees between `value` and `schema` (empty when they agree), as JSON Pointers.
    static func problems(_ value: JSONValue, _ schema: JSONValue, at pointer: String = "") -> [String] {
        if let branches = schema["oneOf"]?.arrayValue {
            let matching = branches.filter { problems(value, $0, at: pointer).isEmpty }
            return matching.count == 1 ? [] : ["\(pointer): matches \(matching.count) of the oneOf branches"]
        }
        if let constant = schema["const"], constant != value { return ["\(pointer): is not \(constant.jsonText)"] }
        if let type = schema["type"]?.stringValue, !hasType(value, type) {
            return ["\(pointer): is \(value.typeName), not \(type)"]
        }
        var found: [String] = []
        if case .object(let object) = value, let properties = schema["properties"]?.objectValue {
            for member in object {
                if let declared = properties[member.key] {
                    found += problems(member.value, declared, at: "\(pointer)/\(member.key)")
                } else {
                    found.append("\(pointer)/\(member.key): not declared")
                }
            }
            for name in required(schema) where object[name] == nil { found.append("\(pointer)/\(name): missing") }
        }
        if case .array(let items) = value, let itemSchema = schema["items"] {
            for (index, item) in items.enumerated() { found += problems(item, itemSchema, at: "\(pointer)/\(index)") }
        }
        return found
    }

    /// The member names `schema` declares.
    static func declared(_ schema: JSONValue) -> Set<String> { Set(schema["properties"]?.objectValue?.keys ?? []) }

    /// The member names `schema` requires.
    static func required(_ schema: JSONValue) -> Set<String> {
        Set(schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// The member names of an object value (none for anything else).
    static func members(_ value: JSONValue) -> Set<String> { Set(value.objectValue?.keys ?? []) }

    private static func hasType(_ value: JSONValue, _ type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("number", .number),
            ("null", .null):
            true
        case ("integer", .number(let number)): number.isInteger
        default: false
        }
    }
}
