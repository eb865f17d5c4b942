/// Building request URLs from an environment's base URL, a path and query parameters.
public enum RequestURL {
    /// Appends `path` to `base`'s path with exactly one slash between them (SPEC §7):
    /// `https://h/api/v1` + `/items` → `https://h/api/v1/items`. A `path` carrying `?query` keeps
    /// it. An empty path (or one that is only a query) leaves `base`'s path as it is.
    public static func join(base: String, path: String) -> String {
        // On the UTF-8 view (every boundary here is an ASCII byte): a request's hot path, where
        // Character-wise prefix and suffix tests showed in profiles.
        let slash = UInt8(ascii: "/")
        let baseBytes = base.utf8
        var rootEnd = baseBytes.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? baseBytes.endIndex
        // Trailing slashes go, but not those of an empty authority's "://".
        while rootEnd > baseBytes.startIndex, baseBytes[baseBytes.index(before: rootEnd)] == slash,
            !baseBytes[..<rootEnd].reversed().starts(with: "//:".utf8)
        {
            rootEnd = baseBytes.index(before: rootEnd)
        }
        let root = base[..<rootEnd]
        let pathBytes = path.utf8
        let tailStart = pathBytes.firstIndex { $0 != slash } ?? pathBytes.endIndex
        let tail = path[tailStart...]
        if tail.isEmpty { return String(root) + (path.isEmpty ? "" : "/") }
        if let first = tail.utf8.first, first == UInt8(ascii: "?") || first == UInt8(ascii: "#") {
            return String(root) + tail
        }
        return String(root) + "/" + tail
    }

    /// Encodes `pairs` as a query (`name=value` joined by `&`, every byte but the unreserved
    /// ones percent-encoded, so a space is `%20`) without the leading `?`.
    public static func query(_ pairs: [(String, String)]) -> String {
        var output = ""
        for (index, (name, value)) in pairs.enumerated() {
            if index > 0 { output += "&" }
            output += PercentEncoding.encodeUnreserved(name)
            output += "="
            output += PercentEncoding.encodeUnreserved(value)
        }
        return output
    }

    /// Percent-encodes one query name or value as ``query(_:)`` does (space as `%20`).
    public static func queryComponent(_ text: String) -> String {
        PercentEncoding.encodeUnreserved(text)
    }

    /// Appends `pairs` to `url`'s query (keeping any existing one, before a fragment).
    public static func appendingQuery(_ pairs: [(String, String)], to url: String) -> String {
        guard !pairs.isEmpty else { return url }
        var head = Substring(url)
        var fragment: Substring = ""
        if let hash = url.firstIndex(of: "#") {
            head = url[..<hash]
            fragment = url[hash...]
        }
        let separator: String
        if let question = head.firstIndex(of: "?") {
            separator = head[head.index(after: question)...].isEmpty || head.hasSuffix("&") ? "" : "&"
        } else {
            separator = "?"
        }
        return head + separator + query(pairs) + fragment
    }
}
