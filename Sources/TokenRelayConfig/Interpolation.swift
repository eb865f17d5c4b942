import TokenRelayHTTPFields

/// `${VAR}`, `${VAR:-default}` and `$$` in string scalars, with shell semantics for the default
/// (used when VAR is unset or empty). A `$` not followed by `{` or `$` is kept as is.
enum Interpolation {
    /// The outcome of interpolating one scalar.
    struct Outcome: Equatable {
        /// The text with every reference replaced (an unset variable without default becomes "").
        var text: String
        /// Variables that were unset (or empty) and had no default, in order of appearance.
        var missing: [String]
        /// Whether the text contained any `${...}` reference.
        var referencedVariables: Bool
    }

    /// A malformed reference, with the character offset where it starts.
    struct Failure: Error, Equatable {
        var message: String
        var offset: Int
    }

    /// Interpolates `text` against `environment`.
    static func apply(_ text: String, environment: [String: String]) throws(Failure) -> Outcome {
        // On the bytes: `String.contains(_: String)` is Foundation's, through NSString.
        guard text.utf8.contains(UInt8(ascii: "$")) else {
            return Outcome(text: text, missing: [], referencedVariables: false)
        }
        let characters = Array(text)
        var output = ""
        var missing: [String] = []
        var referenced = false
        var index = 0
        while index < characters.count {
            let character = characters[index]
            guard character == "$", index + 1 < characters.count else {
                output.append(character)
                index += 1
                continue
            }
            let next = characters[index + 1]
            if next == "$" {
                output.append("$")
                index += 2
                continue
            }
            guard next == "{" else {
                output.append(character)
                index += 1
                continue
            }
            guard let close = characters[(index + 2)...].firstIndex(of: "}") else {
                throw Failure(message: "unterminated '${' (missing '}'); write '$$' for a literal '$'", offset: index)
            }
            let body = String(characters[(index + 2)..<close])
            let name: String
            let fallback: String?
            if let range = body.firstRange(of: ":-") {
                name = String(body[..<range.lowerBound])
                fallback = String(body[range.upperBound...])
            } else {
                name = body
                fallback = nil
            }
            guard isValidName(name) else {
                throw Failure(
                    message:
                        "'${\(body)}' is not a valid variable reference: use ${NAME} or ${NAME:-default} with letters, digits and '_'",
                    offset: index)
            }
            referenced = true
            if let value = environment[name], !value.isEmpty {
                output += value
            } else if let fallback {
                output += fallback
            } else {
                missing.append(name)
            }
            index = close + 1
        }
        return Outcome(text: output, missing: missing, referencedVariables: referenced)
    }

    /// Whether `name` is a shell-style variable name: an ASCII letter or `_`, then letters, digits
    /// and `_`.
    static func isValidName(_ name: String) -> Bool {
        var bytes = name.utf8.makeIterator()
        guard let first = bytes.next(), first == UInt8(ascii: "_") || ASCII.isLetter(first) else { return false }
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "_") || ASCII.isLetter(byte) || ASCII.isDigit(byte) else { return false }
        }
        return true
    }
}
