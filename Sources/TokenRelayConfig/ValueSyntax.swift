import FoundationEssentials
import TokenRelayHTTPFields

/// Pure parsers for the value syntaxes the config uses: durations, sizes, URLs, origins, paths,
/// and the edit distance behind did-you-mean suggestions.
public enum ValueSyntax {
    /// Parses `500ms`, `30s`, `5m`, `1h`, combinations such as `1m30s`, or a plain integer of
    /// seconds. Returns `nil` for anything else (including negative values).
    public static func duration(_ text: String) -> Duration? {
        let trimmed = trimmingSpaces(text)
        guard !trimmed.isEmpty else { return nil }
        if let seconds = Int64(trimmed), seconds >= 0 { return .seconds(seconds) }
        // On the bytes: a duration is ASCII digits and letters only; anything else refuses it.
        let bytes = Array(trimmed.utf8)
        var total = Duration.zero
        var index = 0
        while index < bytes.count {
            var amount: Int64 = 0
            let digitsStart = index
            while index < bytes.count, ASCII.isDigit(bytes[index]) {
                amount = amount * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
                guard amount < 1_000_000_000 else { return nil }
                index += 1
            }
            let unitStart = index
            while index < bytes.count, ASCII.isLetter(bytes[index]) { index += 1 }
            guard unitStart > digitsStart, index > unitStart else { return nil }
            switch String(decoding: bytes[unitStart..<index], as: UTF8.self) {
            case "ms": total += .milliseconds(amount)
            case "s": total += .seconds(amount)
            case "m": total += .seconds(amount * 60)
            case "h": total += .seconds(amount * 3600)
            default: return nil
            }
        }
        return total
    }

    /// `text` without leading and trailing spaces and tabs (what `CharacterSet.whitespaces`
    /// trims: Unicode space separators and tab, not newlines), in plain Swift: Foundation's
    /// `trimmingCharacters` bridges through `NSString`, whose first use is paid at start.
    static func trimmingSpaces(_ text: some StringProtocol) -> String {
        // Nothing to trim when both ends are ASCII other than a space or tab (the usual case).
        let whole = String(text)
        if let first = whole.utf8.first, let last = whole.utf8.last, first < 0x80, last < 0x80,
            first != 0x20, first != 0x09, last != 0x20, last != 0x09
        {
            return whole
        }
        func isSpace(_ character: Character) -> Bool { character.isWhitespace && !character.isNewline }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// Parses a byte size: a plain integer of bytes, or an integer with a unit `B`, `KB`, `MB`,
    /// `GB` (powers of 1000) or `KiB`, `MiB`, `GiB` (powers of 1024), case-insensitive, optional
    /// space. Returns `nil` for anything else or for values that overflow.
    public static func size(_ text: String) -> Int? {
        let trimmed = trimmingSpaces(text)
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let amount = Int(digits) else { return nil }
        let unit = trimmingSpaces(trimmed.dropFirst(digits.count)).lowercased()
        let multiplier: Int
        switch unit {
        case "", "b": multiplier = 1
        case "kb", "k": multiplier = 1000
        case "mb", "m": multiplier = 1_000_000
        case "gb", "g": multiplier = 1_000_000_000
        case "kib": multiplier = 1024
        case "mib": multiplier = 1024 * 1024
        case "gib": multiplier = 1024 * 1024 * 1024
        default: return nil
        }
        let (product, overflow) = amount.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// Why a URL was refused, or `nil` when `text` is an absolute http(s) URL with a host and
    /// no query, fragment or credentials.
    ///
    /// A structural check with line and column for `check-config`; the origin itself is computed
    /// at run time by libcurl's URL parser (the one that sends requests), so this check refuses
    /// what that parser and this one could read differently: spaces, control characters and
    /// backslashes.
    public static func httpURLProblem(_ text: String) -> String? {
        if case .refused(let problem) = httpURL(text) { return problem }
        return nil
    }

    /// An absolute http(s) URL split, or why `text` is not one.
    private enum HTTPURLCheck {
        case url(URLSyntax)
        case refused(String)
    }

    private static func httpURL(_ text: String) -> HTTPURLCheck {
        if text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\\") }) {
            return .refused("must not contain spaces, control characters or backslashes")
        }
        guard let url = URLSyntax(text) else { return .refused("is not a valid absolute URL") }
        guard url.scheme == "http" || url.scheme == "https" else {
            return .refused("must use http or https, not '\(url.scheme)'")
        }
        guard !url.host.isEmpty else { return .refused("has no host") }
        guard !url.hasUserInfo else {
            return .refused("must not contain credentials (user:password@); use a profile instead")
        }
        guard !url.hasQuery else { return .refused("must not contain a query ('?...')") }
        guard !url.hasFragment else { return .refused("must not contain a fragment ('#...')") }
        return .url(url)
    }

    /// Why an OAuth endpoint URL was refused: ``httpURLProblem(_:)``, or plain http on a host
    /// that is not loopback (SPEC §5.2). The rule registering a session applies again, so
    /// `check-config` refuses what `serve` would.
    public static func endpointURLProblem(_ text: String) -> String? {
        let url: URLSyntax
        switch httpURL(text) {
        case .refused(let problem): return problem
        case .url(let split): url = split
        }
        guard url.isAllowedEndpoint else { return "must use https (plain http is allowed only on loopback)" }
        return nil
    }

    /// Why an origin was refused, or `nil` when `text` is `scheme://host[:port]` with an http(s)
    /// scheme (a single trailing `/` is tolerated).
    public static func originProblem(_ text: String) -> String? {
        let url: URLSyntax
        switch httpURL(text) {
        case .refused(let problem): return problem
        case .url(let split): url = split
        }
        guard url.path.isEmpty || url.path == "/" else {
            return "must be an origin (scheme://host[:port]) without a path"
        }
        return nil
    }

    /// Why a proxy URL was refused, or `nil` when it has a supported scheme and a host.
    public static func proxyProblem(_ text: String) -> String? {
        guard let url = URLSyntax(text) else { return "is not a valid URL" }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        guard schemes.contains(url.scheme) else {
            return "must use one of \(schemes.joined(separator: ", ")), not '\(url.scheme)'"
        }
        guard !url.host.isEmpty else { return "has no host" }
        return nil
    }

    /// Expands a leading `~` (alone or followed by `/`) with `home`, then makes a relative path
    /// absolute against `base`. Returns `nil` for `~user` forms, which are not supported.
    public static func expandPath(_ path: String, home: String?, base: String) -> String? {
        var expanded = path
        if path == "~" || path.hasPrefix("~/") {
            guard let home, !home.isEmpty else { return nil }
            expanded = home + path.dropFirst()
        } else if path.hasPrefix("~") {
            return nil
        }
        if expanded.hasPrefix("/") { return expanded }
        let folder = base.isEmpty ? "." : base
        return folder.hasSuffix("/") ? folder + expanded : folder + "/" + expanded
    }

    /// The folder part of a file path (`.` when there is none).
    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The Levenshtein distance between two strings.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.lowercased()), y = Array(b.lowercased())
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                current[j] = Swift.min(
                    previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }

    /// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
    public static func suggestion(for word: String, among candidates: some Sequence<String>) -> String? {
        let limit = Swift.max(2, word.count / 3)
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(word, candidate)
            if distance <= limit, distance < (best?.1 ?? Int.max) { best = (candidate, distance) }
        }
        if let best { return best.0 }
        // A shortened or lengthened key ("idle" for "idle_timeout") is also a likely mistake.
        let lowered = word.lowercased()
        guard lowered.count >= 3 else { return nil }
        let related = candidates.filter { $0.lowercased().hasPrefix(lowered) || lowered.hasPrefix($0.lowercased()) }
        return related.count == 1 ? related.first : nil
    }

    /// Why `name` cannot be a configured header field name, or `nil` when it can: the rules the
    /// transport applies when it sends the field (``HTTPFieldRules``), so a config it would
    /// refuse at request time is refused at load instead. Phrased to follow the quoted name.
    public static func headerNameProblem(_ name: String) -> String? {
        if HTTPFieldRules.isReserved(name) {
            return
                "is set by the transport (a framing, hop-by-hop, Proxy-* or pseudo-header field) and cannot be configured"
        }
        return HTTPFieldRules.isToken(name) ? nil : "is not a valid HTTP header name"
    }
}
