extension URITemplate {
    // MARK: Parsing

    static func parse(_ bytes: [UInt8]) throws(URITemplateError) -> [Part] {
        var parts: [Part] = []
        var literal: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "}") { throw .unexpectedClosingBrace(offset: index) }
            if byte != UInt8(ascii: "{") {
                if byte == UInt8(ascii: "%"), index + 2 < bytes.count, PercentEncoding.isHexDigit(bytes[index + 1]),
                    PercentEncoding.isHexDigit(bytes[index + 2])
                {
                    literal.append(contentsOf: bytes[index...(index + 2)])
                    index += 3
                    continue
                }
                if PercentEncoding.isUnreserved(byte) || PercentEncoding.isReserved(byte) {
                    literal.append(byte)
                } else {
                    PercentEncoding.appendEscaped(byte, to: &literal)
                }
                index += 1
                continue
            }
            guard let close = bytes[index...].firstIndex(of: UInt8(ascii: "}")) else {
                throw .unterminatedExpression(offset: index)
            }
            if !literal.isEmpty {
                parts.append(.literal(String(decoding: literal, as: UTF8.self)))
                literal.removeAll()
            }
            parts.append(try parseExpression(bytes, from: index + 1, to: close))
            index = close + 1
        }
        if !literal.isEmpty { parts.append(.literal(String(decoding: literal, as: UTF8.self))) }
        return parts
    }

    private static func parseExpression(_ bytes: [UInt8], from start: Int, to end: Int) throws(URITemplateError) -> Part
    {
        guard start < end else { throw .emptyExpression(offset: start - 1) }
        var cursor = start
        var op = Operator.from(nil)
        if let explicit = Operator.from(bytes[start]) {
            op = explicit
            cursor += 1
        } else if "=,!@|".utf8.contains(bytes[start]) {
            throw .reservedOperator(String(decoding: [bytes[start]], as: UTF8.self), offset: start)
        }
        guard let op else { throw .emptyExpression(offset: start - 1) }
        var specs: [VariableSpec] = []
        for piece in bytes[cursor..<end].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            specs.append(try parseSpec(piece))
        }
        return .expression(op, specs)
    }

    private static func parseSpec(_ piece: ArraySlice<UInt8>) throws(URITemplateError) -> VariableSpec {
        var nameEnd = piece.endIndex
        var prefix: Int?
        var explode = false
        if piece.last == UInt8(ascii: "*") {
            explode = true
            nameEnd -= 1
        } else if let colon = piece.firstIndex(of: UInt8(ascii: ":")) {
            nameEnd = colon
            let digits = piece[(colon + 1)...]
            guard (1...4).contains(digits.count), digits.first != UInt8(ascii: "0"),
                digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = Int(String(decoding: digits, as: UTF8.self))
            else { throw .invalidPrefix(String(decoding: digits, as: UTF8.self), offset: colon + 1) }
            prefix = value
        }
        let name = piece[piece.startIndex..<nameEnd]
        guard isValidName(name) else {
            throw .invalidVariableName(String(decoding: name, as: UTF8.self), offset: piece.startIndex)
        }
        return VariableSpec(name: String(decoding: name, as: UTF8.self), prefix: prefix, explode: explode)
    }

    /// `varname = varchar *( ["."] varchar )`, `varchar = ALPHA / DIGIT / "_" / pct-encoded`.
    private static func isValidName(_ name: ArraySlice<UInt8>) -> Bool {
        guard let first = name.first, first != UInt8(ascii: "."), name.last != UInt8(ascii: ".") else { return false }
        var index = name.startIndex
        var previousDot = false
        while index < name.endIndex {
            let byte = name[index]
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "_"):
                previousDot = false
            case UInt8(ascii: "."):
                if previousDot { return false }
                previousDot = true
            case UInt8(ascii: "%"):
                guard index + 2 < name.endIndex, PercentEncoding.isHexDigit(name[index + 1]),
                    PercentEncoding.isHexDigit(name[index + 2])
                else { return false }
                index += 2
                previousDot = false
            default: return false
            }
            index += 1
        }
        return true
    }

    // MARK: Expansion (RFC 6570 Appendix A)

    static func expand(
        _ op: Operator, _ specs: [VariableSpec], _ variables: [String: URITemplateValue], into output: inout [UInt8]
    ) throws(URITemplateError) {
        var first = true
        for spec in specs {
            guard let value = variables[spec.name] else { continue }
            switch value {
            case .list(let items) where items.isEmpty: continue
            case .associative(let pairs) where pairs.isEmpty: continue
            default: break
            }
            output.append(contentsOf: (first ? op.first : op.separator).utf8)
            first = false
            switch value {
            case .string(var text):
                if op.named {
                    output.append(contentsOf: spec.name.utf8)
                    if text.isEmpty {
                        output.append(contentsOf: op.ifEmpty.utf8)
                        continue
                    }
                    output.append(UInt8(ascii: "="))
                }
                if let prefix = spec.prefix {
                    text = String(String.UnicodeScalarView(text.unicodeScalars.prefix(prefix)))
                }
                encode(text, allowReserved: op.allowReserved, into: &output)
            case .list(let items):
                if spec.prefix != nil { throw .prefixOnCompositeValue(variable: spec.name) }
                if !spec.explode {
                    if op.named { output.append(contentsOf: (spec.name + "=").utf8) }
                    for (index, item) in items.enumerated() {
                        if index > 0 { output.append(UInt8(ascii: ",")) }
                        encode(item, allowReserved: op.allowReserved, into: &output)
                    }
                } else {
                    for (index, item) in items.enumerated() {
                        if index > 0 { output.append(contentsOf: op.separator.utf8) }
                        if op.named {
                            output.append(contentsOf: spec.name.utf8)
                            if item.isEmpty {
                                output.append(contentsOf: op.ifEmpty.utf8)
                                continue
                            }
                            output.append(UInt8(ascii: "="))
                        }
                        encode(item, allowReserved: op.allowReserved, into: &output)
                    }
                }
            case .associative(let pairs):
                if spec.prefix != nil { throw .prefixOnCompositeValue(variable: spec.name) }
                if !spec.explode {
                    if op.named { output.append(contentsOf: (spec.name + "=").utf8) }
                    for (index, pair) in pairs.enumerated() {
                        if index > 0 { output.append(UInt8(ascii: ",")) }
                        encode(pair.0, allowReserved: op.allowReserved, into: &output)
                        output.append(UInt8(ascii: ","))
                        encode(pair.1, allowReserved: op.allowReserved, into: &output)
                    }
                } else {
                    for (index, pair) in pairs.enumerated() {
                        if index > 0 { output.append(contentsOf: op.separator.utf8) }
                        encode(pair.0, allowReserved: op.allowReserved, into: &output)
                        if op.named, pair.1.isEmpty {
                            output.append(contentsOf: op.ifEmpty.utf8)
                            continue
                        }
                        output.append(UInt8(ascii: "="))
                        encode(pair.1, allowReserved: op.allowReserved, into: &output)
                    }
                }
            }
        }
    }

    /// Unreserved characters pass; with `allowReserved` also reserved ones and existing
    /// pct-encoded triplets; every other UTF-8 byte becomes `%XX`.
    static func encode(_ text: String, allowReserved: Bool, into output: inout [UInt8]) {
        let bytes = text.utf8
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if PercentEncoding.isUnreserved(byte) || (allowReserved && PercentEncoding.isReserved(byte)) {
                output.append(byte)
            } else if allowReserved, byte == UInt8(ascii: "%"),
                let second = bytes.index(index, offsetBy: 1, limitedBy: bytes.endIndex), second < bytes.endIndex,
                let third = bytes.index(index, offsetBy: 2, limitedBy: bytes.endIndex), third < bytes.endIndex,
                PercentEncoding.isHexDigit(bytes[second]), PercentEncoding.isHexDigit(bytes[third])
            {
                output.append(byte)
            } else {
                PercentEncoding.appendEscaped(byte, to: &output)
            }
            index = bytes.index(after: index)
        }
    }
}
