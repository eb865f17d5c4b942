import Testing
import TokenRelayHTTP
import TokenRelayJSONRPC

@testable import TokenRelayServer

/// `request`'s result type: the exact wire text, and agreement with its OpenRPC schema.
@Suite struct RequestMethodResultTests {
    /// The text the answer carries (the result writes it itself); checked against the value its
    /// ``RequestMethod/Result/resultValue`` describes, so the two can never disagree.
    static func wire(_ result: RequestMethod.Result) throws -> String {
        var bytes: [UInt8] = []
        result.write(into: &bytes)
        #expect(try JSONParser.parse(bytes) == result.resultValue)
        #expect(bytes == result.resultValue.serialized(), "the same members in the same order")
        return String(decoding: bytes, as: UTF8.self)
    }

    static func json(_ value: JSONValue) throws -> RequestMethod.Result.Body {
        .json(try JSONParser.compact(value.serialized()))
    }

    @Test func jsonBodyGoesBetweenHeadersAndElapsedAsTheWireAlwaysHadIt() throws {
        let result = RequestMethod.Result(
            status: 200, headers: ["content-type": "application/json", "set-cookie": ["a=1", "b=2"]],
            body: try Self.json(["id": 7, "big": .number(JSONNumber(UInt64(12_345_678_901_234_567_890)))]),
            elapsed: .microseconds(1500))
        #expect(
            try Self.wire(result)
                == #"{"status":200,"headers":{"content-type":"application/json","set-cookie":["a=1","b=2"]},"json":{"id":7,"big":12345678901234567890},"elapsedMs":1.5}"#
        )
    }

    @Test func anEmptyBodyHasNoBodyMemberAndWholeMillisecondsHaveNoFraction() throws {
        let result = RequestMethod.Result(status: 204, headers: [:], elapsed: .milliseconds(3))
        #expect(try Self.wire(result) == #"{"status":204,"headers":{},"elapsedMs":3}"#)
        #expect(ResultSchema.members(result.resultValue) == ResultSchema.required(RequestMethod.Result.schema))
    }

    @Test func elapsedIsRoundedToTheMicrosecond() throws {
        let result = RequestMethod.Result(status: 200, headers: [:], elapsed: .nanoseconds(1_234_567))
        #expect(result.resultValue["elapsedMs"] == .number(JSONNumber(1.235)))
        #expect(try Self.wire(result).hasSuffix(#","elapsedMs":1.235}"#))
    }

    static let bodies: [RequestMethod.Result.Body] = [
        // Built from text the parser accepts; `try!`-free: a failure shows as a missing case.
        (try? JSONParser.compact(Array(#"{"a": [1, 2], "é": "\u00e9\n"}"#.utf8))).map { .json($0) },
        .text("text with \"quotes\" and a\nnewline"), .base64("YWJj"),
    ].compactMap { $0 }

    @Test(arguments: Self.bodies)
    func eachBodyIsAMemberTheSchemaDeclares(_ body: RequestMethod.Result.Body) throws {
        let result = RequestMethod.Result(
            status: 500, headers: ["x": "y", "z": ["1", "2"]], body: body, elapsed: .seconds(1))
        _ = try Self.wire(result)
        #expect(ResultSchema.problems(result.resultValue, RequestMethod.Result.schema).isEmpty)
        #expect(result.resultValue[body.member] == body.value)
        #expect(RequestMethod.openRPC.result == RequestMethod.Result.schema)
    }

    @Test func everyDeclaredMemberIsOneTheResultTypeCanProduce() {
        #expect(Self.bodies.count == 3)
        let produced = Set(["status", "headers", "elapsedMs"] + Self.bodies.map(\.member))
        #expect(produced == ResultSchema.declared(RequestMethod.Result.schema))
    }

    @Test func responseEncodingFillsTheBodyAndItsEncoding() throws {
        var response = HTTPResponse(status: 200)
        response.headers.add(name: "Content-Type", value: "text/plain")
        response.body = Array("hi".utf8)
        let result = ResponseEncoding.result(response, elapsed: .milliseconds(2))
        #expect(result.body == .text("hi"))
        #expect(
            try Self.wire(result)
                == #"{"status":200,"headers":{"content-type":"text/plain"},"text":"hi","elapsedMs":2}"#)
    }
}
