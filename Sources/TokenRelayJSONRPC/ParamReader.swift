/// Reads by-name params with typed accessors, collecting every problem as a diagnostic with a
/// JSON Pointer, and rejecting unknown members. Call ``finish()`` once every member was read.
///
/// The one place where the editors' spellings of "nothing" are accepted (SPEC §4.2): absent
/// params, `"params": null` and an empty array `[]` (how Lua and Emacs encode an empty table)
/// all mean no params, and an object-typed member given as `[]` reads as an empty object.
///
///     var reader = try ParamReader(params, allowed: ["environment", "all"])
///     let environment = reader.string("environment")
///     let all = reader.bool("all") ?? false
///     try reader.finish()
public struct ParamReader {
    public let object: JSONObject
    public private(set) var diagnostics: [ParamDiagnostic] = []

    /// What to do with members a method does not know.
    public enum UnknownMembers: Sendable {
        /// Report each as a diagnostic (tokenrelay's own methods: typos are caught).
        case reject
        /// Accept and ignore them (`initialize`, which LSP clients fill with members of their own).
        case ignore
    }

    /// - Parameters:
    ///   - allowed: the member names this method knows.
    ///   - unknownMembers: whether members outside `allowed` are reported (the default) or ignored.
    public init(_ params: JSONValue?, allowed: Set<String>, unknownMembers: UnknownMembers = .reject)
        throws(RPCError)
    {
        switch params {
        case nil, .null?: object = JSONObject()
        case .object(let object)?: self.object = object
        case .array(let elements)? where elements.isEmpty: object = JSONObject()
        case .array?:
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "", reason: "params must be an object (by-name)")])
        default:
            throw RPCError.invalidParams([ParamDiagnostic(pointer: "", reason: "params must be an object")])
        }
        guard unknownMembers == .reject else { return }
        for key in object.keys where !allowed.contains(key) {
            diagnostics.append(ParamDiagnostic(pointer: ParamDiagnostic.pointer([key]), reason: "unknown member"))
        }
    }

    /// Records a problem at `path` (pointer components below the params).
    public mutating func report(_ path: [String], _ reason: String) {
        diagnostics.append(ParamDiagnostic(pointer: ParamDiagnostic.pointer(path), reason: reason))
    }

    /// The raw value of `key`, `nil` when absent or null.
    public func value(_ key: String) -> JSONValue? {
        switch object[key] {
        case nil, .null?: nil
        case let value?: value
        }
    }

    public mutating func string(_ key: String, required: Bool = false) -> String? {
        guard let value = value(key) else {
            if required { report([key], "required") }
            return nil
        }
        guard case .string(let text) = value else {
            report([key], "must be a string, not \(value.typeName)")
            return nil
        }
        return text
    }

    public mutating func bool(_ key: String) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else {
            report([key], "must be a boolean, not \(value.typeName)")
            return nil
        }
        return flag
    }

    /// A non-negative integer within `range`.
    public mutating func integer(_ key: String, in range: ClosedRange<Int> = 0...Int.max) -> Int? {
        guard let value = value(key) else { return nil }
        guard case .number(let number) = value, let integer = number.intValue else {
            report([key], "must be an integer, not \(value.typeName)")
            return nil
        }
        guard range.contains(integer) else {
            report([key], "must be between \(range.lowerBound) and \(range.upperBound)")
            return nil
        }
        return integer
    }

    /// An object-typed member; `[]` reads as an empty object (Lua and Emacs encode `{}` so).
    public mutating func objectValue(_ key: String) -> JSONObject? {
        guard let value = value(key) else { return nil }
        switch value {
        case .object(let object): return object
        case .array(let elements) where elements.isEmpty: return JSONObject()
        default:
            report([key], "must be an object, not \(value.typeName)")
            return nil
        }
    }

    /// Checks that a method taking no params got none (absent, `null`, `{}` and `[]` are fine).
    public static func expectNone(_ params: JSONValue?) throws(RPCError) {
        try ParamReader(params, allowed: []).finish()
    }

    /// Throws -32602 with every diagnostic collected, if any.
    public func finish() throws(RPCError) {
        if !diagnostics.isEmpty { throw RPCError.invalidParams(diagnostics) }
    }
}
