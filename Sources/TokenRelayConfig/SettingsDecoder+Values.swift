/// A scalar after interpolation, with what is needed to type it and report problems.
struct ScalarValue {
    /// The interpolated text.
    var text: String
    /// The text as written in the file (safe to quote in messages: it is the file's own text).
    var raw: String
    var style: ScalarStyle
    var tag: String?
    var mark: SourceMark
    /// A variable it references is unset (check mode only): its value is unknown, skip checks.
    var unresolved: Bool
    /// Whether it referenced any `${...}` variable.
    var interpolated: Bool

    /// Whether the scalar is typed as a string by its style or tag (quoted, block or `!!str`).
    var isExplicitString: Bool { style.isQuotedOrBlock || tag == YAMLNode.stringTag }

    /// The raw text for a message, shortened.
    var quoted: String {
        let short = raw.count > 60 ? String(raw.prefix(57)) + "..." : raw
        return "'\(short)'"
    }
}

extension SettingsDecoder {
    /// The interpolated scalar at `node`, or `nil` (with an error) when it is not a scalar or is null.
    mutating func scalar(_ node: YAMLNode, path: String, expected: String) -> ScalarValue? {
        guard let scalar = node.scalar else {
            sink.error("'\(path)' must be \(expected), found \(node.kindDescription)", at: node.mark)
            return nil
        }
        if node.isNull {
            sink.error(
                "'\(path)' has no value; expected \(expected) (remove the key to use the default)", at: node.mark)
            return nil
        }
        let outcome: Interpolation.Outcome
        do {
            outcome = try Interpolation.apply(scalar.value, environment: environment)
        } catch {
            sink.error("'\(path)': \(error.message)", at: node.mark)
            return nil
        }
        var unresolved = false
        for name in outcome.missing {
            let message =
                "environment variable \(name) is not set (used in '\(path)'); set it or write ${\(name):-default}"
            if mode.requiresVariables {
                sink.error(message, at: node.mark)
                return nil
            }
            sink.warning(message, at: node.mark)
            unresolved = true
        }
        return ScalarValue(
            text: outcome.text, raw: scalar.value, style: scalar.style, tag: node.tag, mark: node.mark,
            unresolved: unresolved, interpolated: outcome.referencedVariables)
    }

    /// A string value (any non-null scalar; numbers and booleans are taken as written).
    mutating func string(_ node: YAMLNode, path: String) -> ScalarValue? {
        scalar(node, path: path, expected: "a string")
    }

    /// A non-empty string, or `nil` with an error.
    mutating func nonEmptyString(_ node: YAMLNode, path: String) -> ScalarValue? {
        guard let value = string(node, path: path) else { return nil }
        if value.text.isEmpty && !value.unresolved {
            sink.error("'\(path)' must not be empty", at: node.mark)
            return nil
        }
        return value
    }

    /// An integer: a plain scalar (or `!!int`) of digits. `nil` when missing, wrong or unresolved.
    mutating func integer(_ node: YAMLNode, path: String, range: ClosedRange<Int>) -> Int? {
        guard let value = scalar(node, path: path, expected: "an integer"), !value.unresolved else { return nil }
        guard !value.isExplicitString || value.tag == YAMLNode.intTag else {
            sink.error(
                "'\(path)' must be an integer, found a quoted string \(value.quoted); remove the quotes", at: node.mark)
            return nil
        }
        guard let number = Int(value.text) else {
            sink.error("'\(path)' must be an integer, found \(value.quoted)", at: node.mark)
            return nil
        }
        guard range.contains(number) else {
            sink.error(
                "'\(path)' must be between \(range.lowerBound) and \(range.upperBound), found \(number)", at: node.mark)
            return nil
        }
        return number
    }

    /// A boolean: plain `true`/`false` (any case) or `!!bool`.
    mutating func boolean(_ node: YAMLNode, path: String) -> Bool? {
        guard let value = scalar(node, path: path, expected: "a boolean (true or false)"), !value.unresolved else {
            return nil
        }
        let lowered = value.text.lowercased()
        guard !value.isExplicitString || value.tag == YAMLNode.boolTag, lowered == "true" || lowered == "false" else {
            sink.error("'\(path)' must be a boolean (true or false, unquoted), found \(value.quoted)", at: node.mark)
            return nil
        }
        return lowered == "true"
    }

    /// A duration (`500ms`, `30s`, `5m`, `1h`, or an integer of seconds).
    mutating func duration(_ node: YAMLNode, path: String, allowZero: Bool = false) -> Duration? {
        let expected = "a duration such as 500ms, 30s, 5m or 1h (a plain number is seconds)"
        guard let value = scalar(node, path: path, expected: expected), !value.unresolved else { return nil }
        guard let duration = ValueSyntax.duration(value.text) else {
            sink.error("'\(path)' must be \(expected), found \(value.quoted)", at: node.mark)
            return nil
        }
        if !allowZero && duration == .zero {
            sink.error("'\(path)' must be longer than zero", at: node.mark)
            return nil
        }
        return duration
    }

    /// A byte size (an integer of bytes, or `512KiB`, `64MiB`, `1MB`, ...), greater than zero.
    mutating func size(_ node: YAMLNode, path: String) -> Int? {
        let expected = "a size: a number of bytes or a value such as 512KiB, 64MiB or 1MB"
        guard let value = scalar(node, path: path, expected: expected), !value.unresolved else { return nil }
        guard let bytes = ValueSyntax.size(value.text), bytes > 0 else {
            sink.error("'\(path)' must be \(expected), found \(value.quoted)", at: node.mark)
            return nil
        }
        return bytes
    }

    /// An absolute http(s) URL.
    mutating func httpURL(_ node: YAMLNode, path: String) -> String? {
        url(node, path: path, problem: ValueSyntax.httpURLProblem)
    }

    /// An OAuth endpoint: an absolute URL that uses https, or plain http on loopback (SPEC §5.2).
    mutating func endpointURL(_ node: YAMLNode, path: String) -> String? {
        url(node, path: path, problem: ValueSyntax.endpointURLProblem)
    }

    private mutating func url(_ node: YAMLNode, path: String, problem: (String) -> String?) -> String? {
        guard let value = nonEmptyString(node, path: path) else { return nil }
        if !value.unresolved, let problem = problem(value.text) {
            sink.error("'\(path)' \(problem): \(value.quoted)", at: node.mark)
            return nil
        }
        return value.text
    }

    /// One of `choices`, with a did-you-mean when it is close to one.
    mutating func choice(_ node: YAMLNode, path: String, choices: [String]) -> String? {
        guard let value = nonEmptyString(node, path: path), !value.unresolved else { return nil }
        guard choices.contains(value.text) else {
            var message = "'\(path)' must be one of \(choices.joined(separator: ", ")), found \(value.quoted)"
            if let guess = ValueSyntax.suggestion(for: value.text, among: choices) {
                message += "; did you mean '\(guess)'?"
            }
            sink.error(message, at: node.mark)
            return nil
        }
        return value.text
    }

    /// A list of non-empty strings; with `splitting`, a single string is split on spaces.
    mutating func stringList(_ node: YAMLNode, path: String, splittingString: Bool = false) -> [String]? {
        if node.isNull { return [] }
        if splittingString, node.scalar != nil {
            guard let value = string(node, path: path) else { return nil }
            return value.text.split(separator: " ").map(String.init)
        }
        guard let items = node.items else {
            let expected = splittingString ? "a list of strings or a space-separated string" : "a list of strings"
            sink.error("'\(path)' must be \(expected), found \(node.kindDescription)", at: node.mark)
            return nil
        }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            if let value = nonEmptyString(item, path: "\(path)[\(index)]") { result.append(value.text) }
        }
        return result
    }

    /// A path with `~` expanded and made absolute against the config's folder.
    mutating func filePath(_ node: YAMLNode, path: String) -> String? {
        guard let value = nonEmptyString(node, path: path), !value.unresolved else { return nil }
        guard let expanded = ValueSyntax.expandPath(value.text, home: environment["HOME"], base: folder) else {
            sink.error(
                "'\(path)': cannot expand \(value.quoted) (only '~' and '~/...' are supported, and HOME must be set)",
                at: node.mark)
            return nil
        }
        return expanded
    }
}
