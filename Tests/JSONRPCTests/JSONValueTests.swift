import Testing

@testable import TokenRelayJSONRPC

@Suite struct JSONValueTests {
    @Test(arguments: [
        "12345678901234567890", "-98765432109876543210987654321", "0", "-0", "1.5", "1e400", "-2.5E-3",
        "3.141592653589793238462643383279",
    ])
    func numbersRoundTripExactly(literal: String) throws {
        let value = try JSONParser.parse("[\(literal)]")
        #expect(value == .array([.number(JSONNumber(literal: literal)!)]))
        #expect(value.jsonText == "[\(literal)]")
    }

    @Test func objectsKeepMemberOrderAndNestedValues() throws {
        let text = #"{"z":1,"a":[true,false,null],"m":{"k":"v"},"s":"x"}"#
        let value = try JSONParser.parse(text)
        #expect(value.jsonText == text)
        #expect(value["m"]?["k"] == "v")
        #expect(value.objectValue?.keys == ["z", "a", "m", "s"])
    }

    @Test func stringEscapesDecodeAndEncode() throws {
        let value = try JSONParser.parse(#""a\"b\\c\/d\n\t\r\b\f\u00e9\ud83d\ude00\u0001""#)
        #expect(value == .string("a\"b\\c/d\n\t\r\u{08}\u{0C}é😀\u{01}"))
        #expect(value.jsonText == #""a\"b\\c/d\n\t\r\u0008\u000cé😀\u0001""#)
    }

    @Test(arguments: [
        ("short \"q\"", #""short \"q\"""#),
        (
            "\"a string longer than fifteen bytes\nwith escapes at both ends\u{01}",
            #""\"a string longer than fifteen bytes\nwith escapes at both ends\u0001""#
        ),
        (String(repeating: "x", count: 300) + "\\", "\"" + String(repeating: "x", count: 300) + #"\\""#),
        ("", #""""#),
    ])
    func stringsOfEverySizeAreEscapedAtTheirEnds(_ text: String, _ json: String) {
        #expect(JSONValue.string(text).jsonText == json)
        #expect(JSONValue.string(String(text[...])).jsonText == json, "from a substring")
    }

    @Test func loneSurrogatesBecomeReplacementCharacters() throws {
        #expect(try JSONParser.parse(#""\ud83d x""#) == .string("\u{FFFD} x"))
        #expect(try JSONParser.parse(#""\ude00""#) == .string("\u{FFFD}"))
    }

    @Test func nonASCIIIsWrittenAsUTF8() throws {
        let value: JSONValue = ["text": "héllo wörld ✓ 日本"]
        #expect(String(decoding: value.serialized(), as: UTF8.self) == #"{"text":"héllo wörld ✓ 日本"}"#)
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "01", "1.", "-", "1e", "tru", "nul", "\"abc", "\"\\x\"",
        "\"\u{01}\"", "[1] x", "{'a':1}", "NaN", "[1 2]", "{\"a\":1,}", "\"\\u12\"",
    ])
    func malformedInputIsRejected(text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    @Test func deepNestingIsBounded() throws {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        let fine = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(try JSONParser.parse(fine).arrayValue != nil)
    }

    @Test func numberAccessorsConvertWhenExact() throws {
        #expect(JSONNumber(literal: "42")?.intValue == 42)
        #expect(JSONNumber(literal: "42.0")?.intValue == nil)
        #expect(JSONNumber(literal: "99999999999999999999")?.intValue == nil)
        #expect(JSONNumber(literal: "1.5")?.doubleValue == 1.5)
        #expect(JSONNumber(literal: "abc") == nil)
    }
}
