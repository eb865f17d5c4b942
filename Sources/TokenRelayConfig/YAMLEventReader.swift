import CYAML

/// The one place that touches libyaml: it drives the parser's event API over a byte buffer and
/// copies every event into a Swift ``YAMLEvent`` value, so nothing outside this file ever sees a
/// C pointer.
///
/// Invariants the unsafe code below relies on:
/// - `parser` and `event` are heap-allocated once (`allocate(capacity: 1)`), so their addresses
///   are stable for libyaml, which keeps pointers into them between calls. They are
///   deinitialised with `yaml_parser_delete`/`yaml_event_delete` and deallocated in `defer`.
/// - The input buffer is borrowed with `withUnsafeBufferPointer` and the whole parse happens
///   inside that closure; libyaml reads it without copying, so no pointer to it escapes.
/// - Every event is deleted with `yaml_event_delete` right after it is copied; strings inside
///   it (value, anchor, tag) are copied into Swift `String`s before that.
/// - `yaml_parser_parse` is only called while `parser.error == YAML_NO_ERROR`.
enum YAMLEventReader {
    /// Hands the events of `bytes` to `consume` as libyaml produces them (no list of events is
    /// kept). Stops after the stream's end, or at the start of a second document (which the tree
    /// builder rejects without it being parsed), or when `consume` throws.
    static func read(
        _ bytes: [UInt8], _ consume: (YAMLEvent) throws(YAMLError) -> Void
    ) throws(YAMLError) {
        if bytes.isEmpty {
            try consume(.streamStart)
            try consume(.streamEnd)
            return
        }
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) == 1 else {
            throw YAMLError(
                message: "the YAML parser could not start (out of memory)", mark: SourceMark(line: 1, column: 1))
        }
        defer { yaml_parser_delete(parser) }
        let event = UnsafeMutablePointer<yaml_event_t>.allocate(capacity: 1)
        defer { event.deallocate() }

        let failure = bytes.withUnsafeBufferPointer { buffer -> YAMLError? in
            guard let base = buffer.baseAddress else { return nil }
            yaml_parser_set_input_string(parser, base, buffer.count)
            var documentsEnded = 0
            while true {
                guard yaml_parser_parse(parser, event) == 1 else {
                    return parserError(parser.pointee, bytes: buffer)
                }
                let copied = copy(event.pointee)
                yaml_event_delete(event)
                do throws(YAMLError) {
                    try consume(copied)
                } catch {
                    return error
                }
                switch copied {
                case .streamEnd:
                    return nil
                case .documentEnd:
                    documentsEnded += 1
                case .documentStart where documentsEnded > 0:
                    // The tree builder has refused it already; a consumer that does not still
                    // never gets a second document's content.
                    return nil
                default:
                    break
                }
            }
        }
        if let failure { throw failure }
    }

    /// Copies one C event into a Swift value.
    private static func copy(_ event: yaml_event_t) -> YAMLEvent {
        let mark = SourceMark(event.start_mark)
        switch event.type {
        case YAML_STREAM_START_EVENT:
            return .streamStart
        case YAML_STREAM_END_EVENT:
            return .streamEnd
        case YAML_DOCUMENT_START_EVENT:
            return .documentStart(mark)
        case YAML_DOCUMENT_END_EVENT:
            return .documentEnd
        case YAML_ALIAS_EVENT:
            return .alias(anchor: string(event.data.alias.anchor) ?? "", mark: mark)
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let value: String
            if let pointer = scalar.value {
                value = String(decoding: UnsafeBufferPointer(start: pointer, count: scalar.length), as: UTF8.self)
            } else {
                value = ""
            }
            let style: ScalarStyle
            switch scalar.style {
            case YAML_SINGLE_QUOTED_SCALAR_STYLE: style = .singleQuoted
            case YAML_DOUBLE_QUOTED_SCALAR_STYLE: style = .doubleQuoted
            case YAML_LITERAL_SCALAR_STYLE: style = .literal
            case YAML_FOLDED_SCALAR_STYLE: style = .folded
            default: style = .plain
            }
            return .scalar(
                value: value, style: style, anchor: string(scalar.anchor), tag: string(scalar.tag), mark: mark)
        case YAML_SEQUENCE_START_EVENT:
            let start = event.data.sequence_start
            return .sequenceStart(anchor: string(start.anchor), tag: string(start.tag), mark: mark)
        case YAML_SEQUENCE_END_EVENT:
            return .sequenceEnd
        case YAML_MAPPING_START_EVENT:
            let start = event.data.mapping_start
            return .mappingStart(anchor: string(start.anchor), tag: string(start.tag), mark: mark)
        case YAML_MAPPING_END_EVENT:
            return .mappingEnd
        default:
            return .documentEnd
        }
    }

    /// A NUL-terminated libyaml string as a Swift string.
    private static func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        guard let pointer else { return nil }
        return String(cString: UnsafePointer(pointer))
    }

    /// The parser's error as a ``YAMLError`` at the problem's (1-based) mark, with the byte found
    /// there so the tree layer can add a hint (tabs, indentation).
    private static func parserError(_ parser: yaml_parser_t, bytes: UnsafeBufferPointer<UInt8>) -> YAMLError {
        let problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        let context = parser.context.map { String(cString: $0) }
        let mark = SourceMark(parser.problem_mark)
        let index = Int(parser.problem_mark.index)
        let found: UInt8? = index >= 0 && index < bytes.count ? bytes[index] : nil
        return YAMLError.fromParser(problem: problem, context: context, mark: mark, byteAtMark: found)
    }
}

extension SourceMark {
    /// A 1-based mark from libyaml's 0-based one.
    fileprivate init(_ mark: yaml_mark_t) {
        self.init(line: Int(mark.line) + 1, column: Int(mark.column) + 1)
    }
}
