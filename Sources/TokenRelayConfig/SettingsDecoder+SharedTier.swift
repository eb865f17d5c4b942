import FoundationEssentials

extension SettingsDecoder {
    /// `store.shared: {type: postgres, url, password, timeout, schema}` (SPEC §11).
    mutating func decodeSharedTier(_ node: YAMLNode) -> SharedTierSettings? {
        let path = "store.shared"
        guard let keys = fields(node, path: path, context: "'store.shared'", allowed: Self.sharedTierKeys) else {
            return nil
        }
        guard let typePair = keys["type"] else {
            sink.error("'store.shared' needs 'type: postgres'", at: node.mark)
            return nil
        }
        guard choice(typePair.value, path: "\(path).type", choices: ["postgres"]) != nil else { return nil }
        guard let urlPair = keys["url"] else {
            sink.error(
                "'store.shared' needs 'url' (e.g. postgresql://tr@db.internal/tokens?sslmode=verify-full)",
                at: node.mark)
            return nil
        }
        guard let url = nonEmptyString(urlPair.value, path: "\(path).url") else { return nil }
        var settings = SharedTierSettings(url: url.text)
        if !url.unresolved {
            guard let parsed = PostgresURL(url.text) else {
                sink.error(
                    "'\(path).url' must be a postgresql:// or postgres:// URL, found \(url.quoted)",
                    at: urlPair.value.mark)
                return nil
            }
            if parsed.hasPassword {
                sink.error(
                    "'\(path).url' holds a password; give it in '\(path).password' (a secret source) instead",
                    at: urlPair.value.mark)
                return nil
            }
            if !parsed.isLoopback && !parsed.verifiesServer && !mode.isServe {
                sink.warning(
                    "'\(path).url' reaches \(parsed.hosts.joined(separator: ",")) with sslmode=\(parsed.sslMode ?? "prefer (the default)"): "
                        + "the server is not verified, so a machine in the path can read and change the fleet's sealed rows "
                        + "and see its password; use sslmode=verify-full",
                    at: urlPair.value.mark)
            }
        }
        if let pair = keys["password"] {
            settings.password = secretSource(pair.value, path: "\(path).password")
        }
        if let pair = keys["timeout"], let timeout = duration(pair.value, path: "\(path).timeout") {
            settings.timeout = timeout
        }
        if let pair = keys["schema"], let schema = nonEmptyString(pair.value, path: "\(path).schema") {
            if PostgresURL.isPlainIdentifier(schema.text) {
                settings.schema = schema.text
            } else {
                sink.error(
                    "'\(path).schema' must be a lower-case identifier (letters, digits, '_'; at most 40), found \(schema.quoted)",
                    at: pair.value.mark)
            }
        }
        return settings
    }
}

/// What `check-config` needs of a libpq URL: its hosts, `sslmode`, and whether it holds a password.
struct PostgresURL {
    var hosts: [String] = []
    var sslMode: String?
    var hasPassword = false

    /// `nil` unless `text` is a `postgresql://` or `postgres://` URL.
    init?(_ text: String) {
        let rest: Substring
        if text.hasPrefix("postgresql://") {
            rest = text.dropFirst("postgresql://".count)
        } else if text.hasPrefix("postgres://") {
            rest = text.dropFirst("postgres://".count)
        } else {
            return nil
        }
        let queryStart = rest.firstIndex(of: "?")
        let beforeQuery = queryStart.map { rest[..<$0] } ?? rest
        let authority = beforeQuery.firstIndex(of: "/").map { beforeQuery[..<$0] } ?? beforeQuery
        var hostPart = authority
        if let at = authority.lastIndex(of: "@") {
            let user = authority[..<at]
            hasPassword = user.contains(":")
            hostPart = authority[authority.index(after: at)...]
        }
        for host in hostPart.split(separator: ",") {
            var name = host
            if name.hasPrefix("[") {
                name = name.dropFirst().prefix { $0 != "]" }
            } else if let colon = name.firstIndex(of: ":") {
                name = name[..<colon]
            }
            hosts.append(Self.percentDecoded(name))
        }
        if let queryStart {
            for item in rest[rest.index(after: queryStart)...].split(separator: "&") {
                let parts = item.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                let value = Self.percentDecoded(parts[1])
                switch parts[0] {
                case "sslmode": sslMode = value
                case "host": hosts = value.split(separator: ",").map(String.init)
                case "password": hasPassword = true
                default: break
                }
            }
        }
    }

    /// `text` with `%XX` escapes decoded (a bad escape is kept as written).
    static func percentDecoded(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Every host is loopback or a Unix socket directory (no host: libpq's default socket).
    var isLoopback: Bool {
        hosts.allSatisfy { host in
            host.isEmpty || host.hasPrefix("/") || host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }
    }

    /// `sslmode=verify-full`: the server's certificate and name are checked.
    var verifiesServer: Bool { sslMode == "verify-full" }

    /// A schema name used unquoted-safe in SQL: `[a-z_][a-z0-9_]*`, at most 40 bytes.
    static func isPlainIdentifier(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 40,
            first == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
        else { return false }
        return text.utf8.allSatisfy {
            $0 == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
        }
    }
}
