import HTTP
import JSONRPC
import Testing

@testable import Relay

/// `request`'s result type: the exact wire text, and agreement with its OpenRPC schema.
@Suite struct RequestMethodResultTests {
    @Test func jsonBodyGoesBetweenHeadersAndElapsedAsTheWireAlwaysHadIt() {
        let result = RequestMethod.Result(
            status: 200, headers: ["content-type": "application/json", "set-cookie": ["a=1", "b=2"]],
            body: ["id": 7, "big": .number(JSONNumber(UInt64(12_345_678_901_234_567_890)))], bodyEncoding: .json,
            elapsed: .microseconds(1500))
        #expect(
            result.resultValue.jsonText
                == #"{"status":200,"headers":{"content-type":"application/json","set-cookie":["a=1","b=2"]},"json":{"id":7,"big":12345678901234567890},"elapsedMs":1.5}"#
        )
    }

    @Test func anEmptyBodyHasNoBodyMemberAndWholeMillisecondsHaveNoFraction() {
        let result = RequestMethod.Result(status: 204, headers: [:], elapsed: .milliseconds(3))
        #expect(result.resultValue.jsonText == #"{"status":204,"headers":{},"elapsedMs":3}"#)
        #expect(ResultSchema.members(result.resultValue) == ResultSchema.required(RequestMethod.Result.schema))
    }

    @Test func elapsedIsRoundedToTheMicrosecond() {
        let result = RequestMethod.Result(status: 200, headers: [:], elapsed: .nanoseconds(1_234_567))
        #expect(result.resultValue["elapsedMs"] == .number(JSONNumber(1.235)))
    }

    @Test(arguments: RequestMethod.Result.BodyEncoding.allCases)
    func eachBodyEncodingIsAMemberTheSchemaDeclares(_ encoding: RequestMethod.Result.BodyEncoding) {
        let body: JSONValue = encoding == .json ? ["a": [1, 2]] : "text"
        let result = RequestMethod.Result(
            status: 500, headers: ["x": "y"], body: body, bodyEncoding: encoding, elapsed: .seconds(1))
        #expect(ResultSchema.problems(result.resultValue, RequestMethod.Result.schema).isEmpty)
        #expect(result.resultValue[encoding.rawValue] == body)
        #expect(RequestMethod.openRPC.result == RequestMethod.Result.schema)
    }

    @Test func everyDeclaredMemberIsOneTheResultTypeCanProduce() {
        let produced = Set(
            ["status", "headers", "elapsedMs"] + RequestMethod.Result.BodyEncoding.allCases.map(\.rawValue))
        #expect(produced == ResultSchema.declared(RequestMethod.Result.schema))
    }

    @Test func responseEncodingFillsTheBodyAndItsEncoding() {
        var response = HTTPResponse(status: 200)
        response.headers.add(name: "Content-Type", value: "text/plain")
        response.body = Array("hi".utf8)
        let result = ResponseEncoding.result(response, elapsed: .milliseconds(2))
        #expect(result.bodyEncoding == .text && result.body == "hi")
        #expect(
            result.resultValue.jsonText
                == #"{"status":200,"headers":{"content-type":"text/plain"},"text":"hi","elapsedMs":2}"#)
    }
}
