import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `request` through the real binary against the recording server: query and body encodings,
/// statuses, redirects, cookies, transport failures, timeouts, cancellation, diagnostics.
@Suite struct RequestEndToEndTests {
    static func config(_ server: RecordingServer) -> String {
        """
        version: 1
        default_environment: local
        environments:
          local:
            base_url: \(server.origin)
          small:
            base_url: \(server.origin)/api
            max_response_bytes: 1KiB
          down:
            base_url: http://127.0.0.1:\(server.closedPort)
        """
    }

    @Test func queryArraysRepeatTheKeyAndNumbersAndBooleansGoAsJSONText() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let reply = try await client.request(
            #"{"path":"/echo","query":{"tag":["a","b",3],"n":5,"f":1.5,"big":12345678901234567890,"yes":true,"no":false}}"#
        )
        #expect(reply["result"]?["status"] == .int(200))
        let record = try #require(try server.last("/echo"))
        #expect(record.queryPairs.filter { $0.hasPrefix("tag=") } == ["tag=a", "tag=b", "tag=3"])
        for pair in ["n=5", "f=1.5", "big=12345678901234567890", "yes=true", "no=false"] {
            #expect(record.queryPairs.contains(pair), "\(pair) in \(record.query)")
        }
    }

    @Test func jsonBodyRoundTripsAsAJSONValueWithExactIntegers() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let body = #"{"id":98765432109876543210,"name":"héllo ✓","list":[1,2.5,null,true]}"#
        let reply = try await client.request(#"{"method":"POST","path":"/reflect","json":\#(body)}"#)
        #expect(reply["result"]?["json"]?.jsonText == body)
        let record = try #require(try server.last("/reflect"))
        #expect(try JSONParser.parse(String(decoding: record.body, as: UTF8.self)).jsonText == body)
        #expect(record.header("content-type").first?.hasPrefix("application/json") == true)
    }

    @Test func textBodyIsByteExactBothWays() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let text = "line one\r\nhéllo 日本\t\"quoted\" \\ end\n"
        let reply = try await client.request(
            #"{"method":"PUT","path":"/reflect","headers":{"Content-Type":"text/plain; charset=utf-8"},"text":\#(JSONValue.string(text).jsonText)}"#
        )
        #expect(reply["result"]?["text"]?.stringValue == text)
        #expect(try server.last("/reflect")?.body == Array(text.utf8))
    }

    @Test func binaryBodyIsByteExactBothWaysAsBase64() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let bytes: [UInt8] = (0..<512).map { UInt8(($0 * 7 + 3) % 256) }
        let encoded = Data(bytes).base64EncodedString()
        let reply = try await client.request(
            #"{"method":"POST","path":"/reflect","headers":{"Content-Type":"application/octet-stream"},"base64":"\#(encoded)"}"#
        )
        #expect(decodedBase64(reply["result"]?["base64"]) == bytes)
        #expect(try server.last("/reflect")?.body == bytes)
        let download = try await client.request(#"{"path":"/binary"}"#)
        #expect(decodedBase64(download["result"]?["base64"]) == Array(0...255))
        #expect(download["result"]?["text"] == nil)
    }

    @Test func notFoundAndServerErrorAreResultsNotErrors() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        for status in [404, 500] {
            let reply = try await client.request(#"{"path":"/status/\#(status)"}"#)
            #expect(reply["error"] == nil)
            #expect(reply["result"]?["status"] == .int(status))
            #expect(reply["result"]?["text"]?.stringValue == "status \(status)")
            #expect(reply["result"]?["elapsedMs"]?.numberValue != nil)
        }
    }

    @Test func redirectIsReturnedAndItsTargetIsNeverContacted() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let reply = try await client.request(#"{"path":"/redirect"}"#)
        #expect(reply["result"]?["status"] == .int(302))
        #expect(reply["result"]?["headers"]?["location"]?.stringValue == "\(server.otherOrigin)/contacted")
        // A later request proves the relay is done with the redirect; the target saw nothing.
        _ = try await client.request(#"{"path":"/status/200"}"#)
        #expect(try server.records().filter { $0.server == "other" }.isEmpty)
    }

    @Test func cookiesAreReturnedAsAnArrayAndNeverSentBack() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let reply = try await client.request(#"{"path":"/set-cookie"}"#)
        let cookies = reply["result"]?["headers"]?["set-cookie"]?.arrayValue?.compactMap(\.stringValue)
        #expect(cookies == ["session=s3cr3t; Path=/", "theme=dark"])
        _ = try await client.request(#"{"path":"/echo"}"#)
        _ = try await client.request(#"{"path":"/set-cookie"}"#)
        for record in try server.records() {
            #expect(record.header("cookie").isEmpty, "no Cookie on \(record.path)")
        }
    }

    @Test func connectionRefusedIsATransportError() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let reply = try await client.request(#"{"environment":"down","path":"/anything"}"#)
        #expect(reply["error"]?["data"]?["kind"] == "transport")
        let byURL = try await client.request(#"{"url":"http://127.0.0.1:\#(server.closedPort)/x"}"#)
        #expect(byURL["error"]?["data"]?["kind"] == "transport")
    }

    @Test func slowRouteWithTimeoutMsFailsWithTimeoutLongBeforeTheRouteWouldFinish() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        // The slow route holds the response for 30 s; the reply must come well within that. (2 s,
        // not less: on a busy machine the request must still reach the server within the bound.)
        let reply = try await client.request(#"{"path":"/slow","query":{"id":"t"},"timeoutMs":2000}"#)
        #expect(reply["error"]?["data"]?["kind"] == "timeout")
        // And the server sees the connection go away.
        let closed = try await client.request(#"{"path":"/await","query":{"event":"closed-t"}}"#)
        #expect(closed["result"]?["status"] == .int(200))
    }

    @Test func cancellingAnInFlightRequestAnswersMinus32800AndClosesTheConnection() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        try client.relay.send(
            // A time bound far past the route's: only the cancel can end this request, however busy
            // the machine.
            #"{"jsonrpc":"2.0","id":"slow","method":"request","params":{"path":"/slow","query":{"id":"c"},"timeoutMs":600000}}"#
        )
        let started = try await client.request(#"{"path":"/await","query":{"event":"started-c"}}"#)
        #expect(started["result"]?["status"] == .int(200))
        try client.notify("$/cancelRequest", #"{"id":"slow"}"#)
        let cancelled = try await client.reply(to: "slow")
        #expect(cancelled["error"]?["code"] == .int(-32800))
        let closed = try await client.request(#"{"path":"/await","query":{"event":"closed-c"}}"#)
        #expect(closed["result"]?["status"] == .int(200))
    }

    @Test func unknownEnvironmentAndUnknownProfileHaveTheirKinds() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let environment = try await client.request(#"{"environment":"nope","path":"/echo"}"#)
        #expect(environment["error"]?["data"]?["kind"] == "unknown_environment")
        let profile = try await client.request(#"{"profile":"nope","path":"/echo"}"#)
        #expect(profile["error"]?["data"]?["kind"] == "unknown_profile")
        #expect(try server.records().isEmpty)
    }

    @Test func invalidParamsComeBackWithJSONPointerDiagnostics() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let cases: [(params: String, pointer: String)] = [
            (#"{"path":"/echo","query":{"b":["ok",{"x":1}]}}"#, "/query/b/1"),
            (#"{"path":"/echo","method":5}"#, "/method"),
            (#"{"path":"/echo","headers":{"X-N":1}}"#, "/headers/X-N"),
            (#"{"path":"/echo","text":"a","base64":"AA=="}"#, ""),
        ]
        for (params, pointer) in cases {
            let reply = try await client.request(params)
            #expect(reply["error"]?["code"] == .int(-32602), "\(params)")
            let pointers =
                reply["error"]?["data"]?["diagnostics"]?.arrayValue?.compactMap { $0["pointer"]?.stringValue } ?? []
            if pointer.isEmpty {
                #expect(!pointers.isEmpty, "\(params)")
            } else {
                #expect(pointers.contains(pointer), "\(params): \(pointers)")
            }
        }
        #expect(try server.records().isEmpty)
    }

    @Test func responseLargerThanTheEnvironmentLimitIsALimitErrorAndSmallerIsText() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let small = try await client.request(#"{"environment":"small","path":"/large","query":{"bytes":1000}}"#)
        #expect(small["result"]?["text"]?.stringValue == String(repeating: "x", count: 1000))
        let large = try await client.request(#"{"environment":"small","path":"/large","query":{"bytes":5000}}"#)
        #expect(large["error"]?["data"]?["kind"] == "limit")
        let unlimited = try await client.request(#"{"path":"/large","query":{"bytes":3000000}}"#)
        #expect(unlimited["result"]?["text"]?.stringValue?.utf8.count == 3_000_000)
    }

    @Test func pathTemplatesExpandAndPercentEncodeAgainstABasePath() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let reply = try await client.request(
            #"{"environment":"small","path":"/echo/{id}{?tags*}","pathParams":{"id":"a/b c","tags":["x","y"]}}"#)
        #expect(reply["result"]?["status"] == .int(404), "the route does not exist; the request line is what counts")
        let record = try #require(try server.records().last)
        #expect(record.path == "/api/echo/a%2Fb%20c")
        #expect(record.queryPairs == ["tags=x", "tags=y"])
    }

    @Test func headRequestAndEmptyBodyHaveNoBodyField() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(config: Self.config(server))
        let head = try await client.request(#"{"method":"HEAD","path":"/status/200"}"#)
        #expect(head["result"]?["status"] == .int(200))
        #expect(head["result"]?["text"] == nil && head["result"]?["json"] == nil && head["result"]?["base64"] == nil)
        #expect(try server.last("/status/200")?.method == "HEAD")
        let empty = try await client.request(#"{"method":"DELETE","path":"/status/204"}"#)
        #expect(empty["result"]?["status"] == .int(204))
        #expect(empty["result"]?["text"] == nil && empty["result"]?["json"] == nil && empty["result"]?["base64"] == nil)
    }
}
