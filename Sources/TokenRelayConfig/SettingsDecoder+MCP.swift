import TokenRelayHTTPFields

extension SettingsDecoder {
    /// An `mcp:` block (SPEC §8): rule lists and `max_response_bytes`. A rule that cannot be
    /// parsed is an error at its own position; one that can never match, or an `allow` that
    /// lets any method reach every path, is a warning.
    mutating func decodeMCP(_ node: YAMLNode, path: String, owner: String) -> MCPSettings? {
        guard let keys = fields(node, path: path, context: "'mcp' of \(owner)", allowed: Self.mcpKeys) else {
            return nil
        }
        var settings = MCPSettings()
        settings.allow = mcpRules(keys["allow"], path: "\(path).allow")
        settings.deny = mcpRules(keys["deny"], path: "\(path).deny")
        settings.confirm = mcpRules(keys["confirm"], path: "\(path).confirm")
        if let pair = keys["max_response_bytes"], let value = size(pair.value, path: "\(path).max_response_bytes") {
            settings.maxResponseBytes = value
        }
        for (index, rule) in settings.allow.enumerated() where rule.exposesEverything {
            sink.warning(
                "'\(path).allow[\(index)]' rule '\(rule.text)' lets an agent send any method, POST, PUT, PATCH and DELETE "
                    + "included, to every path of \(owner); list the methods and paths it needs, or put the "
                    + "unsafe ones under 'confirm'",
                at: rule.mark)
        }
        if settings.allow.isEmpty && settings.confirm.isEmpty {
            sink.warning(
                "'\(path)' allows nothing: every call an agent makes to \(owner) is refused (add 'allow' rules)",
                at: node.mark)
        }
        return settings
    }

    mutating func mcpRules(_ pair: YAMLPair?, path: String) -> [MCPRule] {
        guard let pair else { return [] }
        let node = pair.value
        if node.isNull { return [] }
        guard let items = node.items else {
            sink.error(
                "'\(path)' must be a list of rules such as \"GET /repos/**\", found \(node.kindDescription)",
                at: node.mark)
            return []
        }
        var rules: [MCPRule] = []
        for (index, item) in items.enumerated() {
            guard let value = nonEmptyString(item, path: "\(path)[\(index)]"), !value.unresolved else { continue }
            switch MCPRule.parse(value.text, mark: item.mark) {
            case .success(let rule):
                if let reason = rule.neverMatchesReason {
                    sink.warning(
                        "'\(path)[\(index)]' rule '\(rule.text)' can never match: it has \(reason)", at: item.mark)
                }
                rules.append(rule)
            case .failure(let error):
                sink.error("'\(path)[\(index)]': \(error.description)", at: item.mark)
            }
        }
        return rules
    }
}

extension SettingsDecoder {
    /// An `exec:` block (SPEC §12): the child's variables (`{url}`, `{host}`, `{token}`,
    /// `{socket}` templates), rules as §8's (`allow`, `deny`) and `redact`.
    mutating func decodeExec(_ node: YAMLNode, path: String, owner: String) -> ExecSettings? {
        guard let keys = fields(node, path: path, context: "'exec' of \(owner)", allowed: Self.execKeys) else {
            return nil
        }
        var settings = ExecSettings()
        if let pair = keys["env"] {
            for (name, entry) in namedEntries(pair.value, path: "\(path).env") {
                let valid =
                    name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || ASCII.isLetter($0) || ASCII.isDigit($0) }
                    && !ASCII.isDigit(name.utf8.first ?? 0)
                guard valid else {
                    sink.error(
                        "'\(path).env' names the variable '\(name)': write letters, digits and '_', not starting with a digit",
                        at: entry.key.mark)
                    continue
                }
                guard !ExecSettings.reservedVariables.contains(name) else {
                    sink.error(
                        "'\(path).env.\(name)': tokenrelay sets \(name) itself for every child", at: entry.key.mark)
                    continue
                }
                guard let value = string(entry.value, path: "\(path).env.\(name)") else { continue }
                let unknown = ExecSettings.unknownWords(value.text)
                if !unknown.isEmpty {
                    sink.error(
                        "'\(path).env.\(name)' has {\(unknown.joined(separator: "}, {"))}: a template may hold {url}, {host}, {token} and {socket}",
                        at: entry.value.mark)
                    continue
                }
                settings.env.append((name, value.text))
            }
        }
        settings.allow = mcpRules(keys["allow"], path: "\(path).allow")
        settings.deny = mcpRules(keys["deny"], path: "\(path).deny")
        if let pair = keys["redact"], let value = boolean(pair.value, path: "\(path).redact") {
            settings.redact = value
        }
        return settings
    }
}
