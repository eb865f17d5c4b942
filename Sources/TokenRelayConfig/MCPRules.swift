/// What an environment or profile exposes to an agent through `tokenrelay mcp` (SPEC §8): its
/// `mcp:` block. Nothing is exposed without one.
public struct MCPSettings: Sendable, Equatable {
    /// The default cut of a response body handed to an agent (256 KiB).
    public static let defaultMaxResponseBytes = 256 * 1024

    /// Calls these rules allow (unless a `deny` rule matches).
    public var allow: [MCPRule]
    /// Calls these rules refuse, whatever else matches.
    public var deny: [MCPRule]
    /// Calls these rules allow only once the person has accepted (elicitation).
    public var confirm: [MCPRule]
    /// The largest body handed to the agent; `nil`: the default (or the environment's).
    public var maxResponseBytes: Int?

    public init(allow: [MCPRule] = [], deny: [MCPRule] = [], confirm: [MCPRule] = [], maxResponseBytes: Int? = nil) {
        self.allow = allow
        self.deny = deny
        self.confirm = confirm
        self.maxResponseBytes = maxResponseBytes
    }

    /// What the rules decide for a call (`path` already normalised, ``MCPPath/normalise(_:)``).
    /// `deny` wins; then `confirm` (allowed once the person accepts); then `allow`; anything
    /// else is refused.
    ///
    /// One normalisation serves every kind of rule, read conservatively: `deny` and `confirm`
    /// match the path as any plausible server may route it (``MCPPath/routed``: every escape
    /// decoded, ASCII case and a trailing `/` ignored; a `GET` rule covers `HEAD`), so a call
    /// is refused or asked about whenever one reading of it is covered; `allow` matches the path
    /// exactly as it is sent (``MCPPath/segments``). Paths no reading settles (a `;` path
    /// parameter, an empty segment, `.`/`..`) are refused by ``MCPPath/normalise(_:)``.
    public func decide(method: String, path: MCPPath) -> MCPDecision {
        let method = MCPRule.canonicalMethod(method)
        if let rule = deny.first(where: { $0.covers(method: method, path: path) }) { return .denied(rule) }
        if let rule = confirm.first(where: { $0.covers(method: method, path: path) }) { return .confirm(rule) }
        if let rule = allow.first(where: { $0.matches(method: method, path: path) }) { return .allowed(rule) }
        return .unlisted
    }

    /// Equal as written (rule texts and the size; source positions ignored).
    public static func == (lhs: MCPSettings, rhs: MCPSettings) -> Bool {
        lhs.allow.map(\.text) == rhs.allow.map(\.text) && lhs.deny.map(\.text) == rhs.deny.map(\.text)
            && lhs.confirm.map(\.text) == rhs.confirm.map(\.text) && lhs.maxResponseBytes == rhs.maxResponseBytes
    }
}

/// The outcome of matching a call against an `mcp:` block.
public enum MCPDecision: Sendable, Equatable {
    /// An `allow` rule matched and no `deny` rule did.
    case allowed(MCPRule)
    /// A `confirm` rule matched and no `deny` rule did: the person must accept first.
    case confirm(MCPRule)
    /// A `deny` rule matched.
    case denied(MCPRule)
    /// No rule matched: refused.
    case unlisted
}

/// One rule: `"METHOD PATTERN"`, a method (or `*`) and a path pattern relative to `base_url`
/// in which a segment `*` matches one non-empty segment and `**` any number of segments (none
/// included). Literal segments compare with the normalised path, so they are normalised the
/// same way when parsed.
public struct MCPRule: Sendable, Equatable, CustomStringConvertible {
    /// One segment of a pattern.
    public enum Segment: Sendable, Equatable {
        case literal(String)
        /// `*`: exactly one non-empty segment.
        case one
        /// `**`: any number of segments.
        case any
    }

    /// The rule as written (trimmed).
    public var text: String
    /// The method upper-cased, or `nil` for `*` (any method).
    public var method: String?
    /// The pattern as written, literal segments normalised as a path's (``MCPPath/segments``).
    public var segments: [Segment]
    /// The pattern as ``covers(method:path:)`` reads it: literal segments in the routed form of
    /// ``MCPPath/routed`` (every escape decoded, ASCII lower-cased, empty ones dropped).
    public var routedSegments: [Segment]
    /// Where the rule is written.
    public var mark: SourceMark

    public var description: String { text }

    public static func == (lhs: MCPRule, rhs: MCPRule) -> Bool { lhs.text == rhs.text }

    /// Methods that do not change anything at the server (RFC 9110 §9.2.1).
    public static let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS"]

    /// HTTP methods are compared upper-cased (the agent's `get` is sent as `GET`).
    public static func canonicalMethod(_ method: String) -> String {
        method.uppercased()
    }

    /// Parses `"METHOD PATTERN"`; the error says what is wrong.
    public static func parse(_ text: String, mark: SourceMark = .file) -> Result<MCPRule, MCPRuleError> {
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count == 2 else {
            return .failure(
                MCPRuleError(
                    "'\(text)' is not a rule: write \"METHOD PATTERN\", e.g. \"GET /repos/**\" or \"* /status\""))
        }
        let methodText = String(parts[0])
        var method: String?
        if methodText != "*" {
            guard methodText.utf8.allSatisfy(isTokenByte) else {
                return .failure(MCPRuleError("'\(methodText)' is not an HTTP method (write GET, POST, ... or *)"))
            }
            method = canonicalMethod(methodText)
        }
        let pattern = String(parts[1])
        guard pattern.hasPrefix("/") else {
            return .failure(
                MCPRuleError("the pattern '\(pattern)' must start with '/' (it is a path relative to base_url)"))
        }
        var segments: [Segment] = []
        var routedSegments: [Segment] = []
        for raw in pattern.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            let segment = String(decoding: raw, as: UTF8.self)
            switch segment {
            case "*":
                segments.append(.one)
                routedSegments.append(.one)
            case "**":
                segments.append(.any)
                routedSegments.append(.any)
            default:
                if segment.contains("*") {
                    return .failure(
                        MCPRuleError(
                            "'\(segment)' in '\(pattern)': '*' and '**' stand for whole segments (write /v1/*/items, not /v1/item*)"
                        ))
                }
                let literal = MCPPath.normaliseForPattern(segment)
                segments.append(.literal(literal))
                let routed = MCPPath.routedSegment(literal)
                if !routed.isEmpty { routedSegments.append(.literal(routed)) }
            }
        }
        return .success(
            MCPRule(
                text: "\(methodText) \(pattern)", method: method, segments: segments, routedSegments: routedSegments,
                mark: mark))
    }

    /// Why this rule can never match a normalised path, or `nil` when it can.
    public var neverMatchesReason: String? {
        for (index, segment) in segments.enumerated() {
            guard case .literal(let literal) = segment else { continue }
            if literal.isEmpty, index < segments.count - 1 {
                return "an empty segment ('//'), which tokenrelay refuses in every path"
            }
            if literal == "." || literal == ".." {
                return "a '.' or '..' segment, which tokenrelay refuses in every path"
            }
            if let problem = MCPPath.segmentProblem(literal) { return problem }
        }
        return nil
    }

    /// Whether this rule lets any method (unsafe ones included) reach every path.
    public var exposesEverything: Bool { method == nil && segments == [.any] }

    /// Whether the rule matches `method` (already ``canonicalMethod(_:)``) and `path` exactly as
    /// it is sent: how `allow` rules match.
    public func matches(method: String, path: MCPPath) -> Bool {
        if let own = self.method, own != method { return false }
        return Self.match(segments[...], path.segments[...])
    }

    /// Whether the rule covers `method` and `path` as any plausible server may route them: the
    /// routed forms of both (``MCPPath/routed``), and a `GET` rule covers `HEAD` (servers answer
    /// `HEAD` with their `GET` handler). How `deny` and `confirm` rules match.
    public func covers(method: String, path: MCPPath) -> Bool {
        if let own = self.method, own != method, !(own == "GET" && method == "HEAD") { return false }
        return Self.match(routedSegments[...], path.routed[...])
    }

    private static func match(_ pattern: ArraySlice<Segment>, _ path: ArraySlice<String>) -> Bool {
        guard let first = pattern.first else { return path.isEmpty }
        switch first {
        case .any:
            // Any number of segments: try every split (patterns are short; paths too).
            var rest = path
            while true {
                if match(pattern.dropFirst(), rest) { return true }
                guard !rest.isEmpty else { return false }
                rest = rest.dropFirst()
            }
        case .one:
            guard let segment = path.first, !segment.isEmpty else { return false }
            return match(pattern.dropFirst(), path.dropFirst())
        case .literal(let literal):
            guard path.first == literal else { return false }
            return match(pattern.dropFirst(), path.dropFirst())
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'+-.^_`|~".utf8).contains(byte)
        }
    }
}

/// Why a rule could not be parsed.
public struct MCPRuleError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A request path as the rules see it: percent-encoded unreserved bytes decoded, other escapes
/// upper-cased, split into segments. A path with a `.` or `..` segment (however written), an
/// empty segment other than a trailing `/` (`//`), a `;` path parameter (raw or `%3B`), an
/// encoded `/` or `\`, a `\`, a query or fragment, or a bad escape is refused outright: servers
/// disagree on what those mean (Tomcat, Jetty and Spring route `/admin;x/secret` as
/// `/admin/secret`, nginx merges `//`), and a rule must match what the server will act on.
public struct MCPPath: Sendable, Equatable, CustomStringConvertible {
    /// The segments after the leading `/` (`/` alone is one empty segment): what is sent, and
    /// what `allow` rules match.
    public var segments: [String]

    /// The segments as a server may route them, what `deny` and `confirm` rules match: every
    /// escape decoded, ASCII lower-cased, empty segments (a trailing `/`) dropped.
    public var routed: [String] { segments.map(Self.routedSegment).filter { !$0.isEmpty } }

    /// A normalised segment as a server may route it: every escape decoded, ASCII lower-cased.
    public static func routedSegment(_ segment: String) -> String {
        let bytes = Array(segment.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            var byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                byte = high << 4 | low
                index += 2
            }
            output.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte)
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The normalised path: what is matched and what is sent.
    public var description: String { "/" + segments.joined(separator: "/") }

    /// Normalises `path` (which must start with `/`); the error says why it is refused.
    public static func normalise(_ path: String) -> Result<MCPPath, MCPRuleError> {
        guard path.hasPrefix("/") else { return .failure(MCPRuleError("the path must start with '/'")) }
        var segments: [String] = []
        let raws = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (index, raw) in raws.enumerated() {
            if raw.isEmpty, index < raws.count - 1 {
                return .failure(
                    MCPRuleError(
                        "the path has an empty segment ('//'), which servers disagree on (some merge it, some do not); write the path without it"
                    ))
            }
            guard let segment = decodeUnreserved(Array(raw)) else {
                return .failure(MCPRuleError("the path has a '%' that is not followed by two hex digits"))
            }
            // `..;x` is `..` to servers that strip path parameters (Tomcat, Jetty).
            let bare = segment.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            if bare == "." || bare == ".." {
                return .failure(
                    MCPRuleError("the path has a '.' or '..' segment (however encoded); write the path without it"))
            }
            if let problem = segmentProblem(segment) { return .failure(MCPRuleError("the path has \(problem)")) }
            segments.append(segment)
        }
        return .success(MCPPath(segments: segments))
    }

    /// What makes a (normalised) segment impossible in an accepted path, or `nil`.
    static func segmentProblem(_ segment: String) -> String? {
        let upper = segment.uppercased()
        if upper.contains("%2F") { return "an encoded '/' (%2F)" }
        if upper.contains("%25") {
            return
                "an encoded '%' (%25): a server or proxy that decodes twice reads it as another escape (%252F is '/')"
        }
        if upper.contains("%5C") || segment.contains("\\") { return "a '\\' (or %5C)" }
        if upper.contains("%3B") || segment.contains(";") {
            return
                "a ';' (or %3B): a path parameter, which Tomcat, Jetty and Spring strip before routing (/admin;x is /admin to them) and other servers do not"
        }
        if segment.contains("?") || segment.contains("#") { return "a '?' or '#' (give the query in 'query')" }
        if segment.contains("{") || segment.contains("}") { return "a '{' or '}' left over from the path template" }
        if segment.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) || upper.contains("%00") {
            return "a space or control character"
        }
        if segment.utf8.contains(where: { $0 >= 0x80 }) { return "a non-ASCII character (percent-encode it)" }
        return nil
    }

    /// A pattern's literal segment normalised as a path's would be (a bad escape is kept as
    /// written; it then never matches, which ``MCPRule/neverMatchesReason`` reports).
    static func normaliseForPattern(_ segment: String) -> String {
        decodeUnreserved(Array(segment.utf8)) ?? segment
    }

    /// Decodes `%XX` of unreserved bytes (ALPHA, DIGIT, `-`, `.`, `_`, `~`) and upper-cases the
    /// hex of the others; `nil` for a `%` without two hex digits.
    static func decodeUnreserved(_ bytes: [UInt8]) -> String? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2])
            else { return nil }
            let decoded = high << 4 | low
            if isUnreserved(decoded) {
                output.append(decoded)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hexDigit(high))
                output.append(hexDigit(low))
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10
    }
}
