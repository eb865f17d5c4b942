/// A JSON-RPC request id: a number or a string (or `null`, which JSON-RPC 2.0 allows but
/// discourages). Numbers keep their literal, so an id is always echoed exactly as received.
public enum RequestID: Sendable, Hashable, CustomStringConvertible {
    case number(JSONNumber)
    case string(String)
    case null

    /// The id from a JSON value; `nil` when the value cannot be an id.
    public init?(_ value: JSONValue) {
        switch value {
        case .number(let number): self = .number(number)
        case .string(let text): self = .string(text)
        case .null: self = .null
        default: return nil
        }
    }

    /// The id as it goes on the wire.
    public var jsonValue: JSONValue {
        switch self {
        case .number(let number): .number(number)
        case .string(let text): .string(text)
        case .null: .null
        }
    }

    public var description: String { jsonValue.jsonText }
}
