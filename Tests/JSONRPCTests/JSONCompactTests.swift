import Testing

@testable import TokenRelayJSONRPC

/// `JSONParser.compact` is defined as `parse(bytes).serialized()`: its one-pass copy of plain
/// texts must give exactly that, and refuse exactly what the parser refuses.
@Suite struct JSONCompactTests {
    /// Both ways of compacting `bytes`: the same text, or the same error.
    static func expectAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let expected = Result { () throws(JSONParseError) in try JSONParser.parse(bytes).serialized() }
        let compacted = Result { () throws(JSONParseError) in try JSONParser.compact(bytes).bytes }
        #expect(compacted == expected, "\(String(decoding: bytes, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    static let texts: [String] = [
        // Plain (the one-pass copy): white space everywhere it may be, every kind of value.
        #"{"ok":true,"name":"bench","items":[1,2,3],"note":"a small JSON document"}"#,
        " {\n  \"a\" : [ 1 , -2.5e+10 , 0 , 1E5 , true , false , null ] ,\r\n\t\"b\" : { } , \"c\" : [ ] }\n",
        #"{"dup":1,"dup":2}"#, #"[[[[[]]]]]"#, #""""#, #""x""#, "0", "-0", "12345678901234567890", "1.5e-300",
        "true", "null", #"[{"a":{"b":[{"c":"d"}]}}]"#,
        // Not plain (the parser decides): escapes, non-ASCII, invalid UTF-8, surrogates.
        #"{"a":"q\"uote\\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \ud800 x"}"#, "{\"é\":\"日本\"}",
        "\"\u{7F}\"", "[\"\\u0000\"]",
        // Invalid: the parser's own errors.
        "", " ", "{", "}", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, #"{a:1}"#, "[1 2]", "01", "1.", "1e", "-", "+1",
        "tru", "nul", "[true false]", #"{"a":1}x"#, "[]]", "\"abc", "\"a\nb\"", "\"\\x\"", "[\"\\u12\"]", "NaN",
        #"{"a":[}"#, #"{"a":}"#, #"{,}"#, "[,1]",
    ]

    @Test(arguments: Self.texts)
    func agreesWithParseThenSerialize(_ text: String) {
        Self.expectAgreement(Array(text.utf8))
    }

    @Test func invalidUTF8AndControlBytesAgree() {
        for bytes: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0x01, 0x22], [0x5B, 0x80, 0x5D], [0xEF, 0xBB, 0xBF, 0x31],
        ] {
            Self.expectAgreement(bytes)
        }
    }

    @Test func nestingAtAndPastTheLimitAgrees() {
        for depth in [JSONParser.maximumDepth - 1, JSONParser.maximumDepth, JSONParser.maximumDepth + 1] {
            Self.expectAgreement(
                Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8))
            Self.expectAgreement(
                Array((String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)).utf8))
        }
    }

    /// Every single-byte change of a few texts (replaced by a byte that matters to the grammar,
    /// deleted, or doubled): the two ways never part.
    @Test func everyOneByteMutationAgrees() {
        let seeds = [
            #"{"a": [1, -2.5e3, true, null, {"b": "c d"}], "e": false}"#, #"[0, "x", {}, [], 1E+2]"#,
        ]
        let replacements = Array(#"{}[]:,"\ -+.eE0195tfnlu"#.utf8) + [0x0A, 0x00, 0x7F, 0xC3, 0xFF]
        for seed in seeds.map({ Array($0.utf8) }) {
            for position in seed.indices {
                for byte in replacements {
                    var mutated = seed
                    mutated[position] = byte
                    Self.expectAgreement(mutated)
                }
                var deleted = seed
                deleted.remove(at: position)
                Self.expectAgreement(deleted)
                var doubled = seed
                doubled.insert(seed[position], at: position)
                Self.expectAgreement(doubled)
                Self.expectAgreement(Array(seed[..<position]))
            }
        }
    }

    @Test func aPrettyPrintedBodyBecomesOneLine() throws {
        let text = try JSONParser.compact(Array("{\n  \"a\": [\n    1,\n    2\n  ]\n}\n".utf8))
        #expect(String(decoding: text.bytes, as: UTF8.self) == #"{"a":[1,2]}"#)
        #expect(text.value == ["a": [1, 2]])
    }
}
