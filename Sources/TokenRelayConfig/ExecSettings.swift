/// What `tokenrelay exec` serves of an environment (SPEC §12): its `exec:` block.
public struct ExecSettings: Sendable, Equatable {
    /// The template words a variable's value may hold: `{url}`, `{host}`, `{token}`, `{socket}`.
    public static let templateWords: Set<String> = ["url", "host", "token", "socket"]
    /// The variables the child always gets; an `env` entry may not name them.
    public static let reservedVariables: Set<String> = ["TOKENRELAY_URL", "TOKENRELAY_TOKEN"]

    /// The variables the child gets, in file order: a name and its template.
    public var env: [(name: String, template: String)]
    /// Requests these rules allow (unless a `deny` rule matches); empty: every request.
    public var allow: [MCPRule]
    /// Requests these rules refuse, whatever else matches.
    public var deny: [MCPRule]
    /// Whether the profile's known secrets are masked in responses (default `true`).
    public var redact: Bool

    public init(
        env: [(name: String, template: String)] = [], allow: [MCPRule] = [], deny: [MCPRule] = [], redact: Bool = true
    ) {
        self.env = env
        self.allow = allow
        self.deny = deny
        self.redact = redact
    }

    /// What the rules decide for a request (`path` normalised, ``MCPPath/normalise(_:)``), as
    /// §8's rules do: `deny` wins; without `allow` rules every other request is allowed.
    public func decide(method: String, path: MCPPath) -> MCPDecision {
        let everything = allow.isEmpty ? [Self.everything] : allow
        return MCPSettings(allow: everything, deny: deny).decide(method: method, path: path)
    }

    /// `* /**`: the rule `allow` stands for when it lists none.
    static let everything = MCPRule(
        text: "* /**", method: nil, segments: [.any], routedSegments: [.any], mark: .file)

    /// `template` with each `{word}` replaced by `values[word]`; a word without a value becomes "".
    public static func expand(_ template: String, values: [String: String]) -> String {
        var output = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            output += rest[..<open]
            let word = String(rest[rest.index(after: open)..<close])
            if templateWords.contains(word) {
                output += values[word] ?? ""
            } else {
                output += rest[open...close]
            }
            rest = rest[rest.index(after: close)...]
        }
        return output + rest
    }

    /// The `{word}`s of `template` that are not template words.
    static func unknownWords(_ template: String) -> [String] {
        var unknown: [String] = []
        var rest = template[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            let word = String(rest[rest.index(after: open)..<close])
            if !templateWords.contains(word) { unknown.append(word) }
            rest = rest[rest.index(after: close)...]
        }
        return unknown
    }

    /// Equal as written.
    public static func == (lhs: ExecSettings, rhs: ExecSettings) -> Bool {
        lhs.env.elementsEqual(rhs.env) { $0.name == $1.name && $0.template == $1.template }
            && lhs.allow.map(\.text) == rhs.allow.map(\.text) && lhs.deny.map(\.text) == rhs.deny.map(\.text)
            && lhs.redact == rhs.redact
    }
}
