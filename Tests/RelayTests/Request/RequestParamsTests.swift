import Testing

@testable import TokenRelayHTTP
@testable import TokenRelayJSONRPC
@testable import TokenRelayServer

@Suite struct RequestParamsTests {
    func diagnostics(_ params: JSONValue) -> [String: String] {
        do {
            _ = try RequestParams.decode(params)
            return [:]
        } catch {
            var result: [String: String] = [:]
            for item in error.data["diagnostics"]?.arrayValue ?? [] {
                result[item["pointer"]?.stringValue ?? "?"] = item["reason"]?.stringValue
            }
            return result
        }
    }

    @Test func fullParamsDecode() throws {
        let params = try RequestParams.decode([
            "environment": "staging", "profile": "svc", "method": "POST", "path": "/items/{id}",
            "pathParams": ["id": 42], "query": ["a": "x y", "b": [1, true, "z"]], "headers": ["X-Tag": "t"],
            "json": ["n": .number(JSONNumber(literal: "12345678901234567890")!)], "timeoutMs": 1500, "auth": false,
        ])
        #expect(params.environment == "staging")
        #expect(params.profile == "svc")
        #expect(params.method == "POST")
        guard case .path(let template, let variables) = params.target else {
            Issue.record("expected a path")
            return
        }
        #expect(template == "/items/{id}")
        #expect(variables["id"] == 42)
        #expect(params.query.map { "\($0.name)=\($0.value)" } == ["a=x y", "b=1", "b=true", "b=z"])
        #expect(params.headers["x-tag"] == "t")
        #expect(params.body?.bytes == Array(#"{"n":12345678901234567890}"#.utf8))
        #expect(params.body?.defaultContentType == "application/json")
        #expect(params.timeout == .milliseconds(1500))
        #expect(params.auth == false)
    }

    @Test func defaultsAreGETWithAuth() throws {
        let params = try RequestParams.decode(["url": "https://example.test/x"])
        #expect(params.method == "GET")
        #expect(params.auth)
        #expect(params.body == nil)
    }

    @Test func everyProblemIsReportedWithAPointer() {
        let found = diagnostics([
            "method": "GE T", "path": "/x", "url": "https://h/", "query": ["b": ["ok", ["nested"]], "c": ["k": 1]],
            "headers": ["Bad Name": "v", "X-Num": 5, "X-Inject": "a\r\nb"], "json": 1, "text": "t", "timeoutMs": -5,
            "auth": "yes", "bogus": true,
        ])
        #expect(found["/method"] != nil)
        #expect(found["/url"] != nil)
        #expect(found["/query/b/1"] != nil)
        #expect(found["/query/c"] != nil)
        #expect(found["/headers/Bad Name"] != nil)
        #expect(found["/headers/X-Num"] != nil)
        #expect(found["/headers/X-Inject"] != nil)
        #expect(found["/text"] != nil)
        #expect(found["/timeoutMs"] != nil)
        #expect(found["/auth"] != nil)
        #expect(found["/bogus"] != nil)
    }

    @Test func aTargetIsRequired() {
        #expect(diagnostics(["method": "GET"])[""] != nil)
        #expect(diagnostics(["url": "ftp://x/"])["/url"] != nil)
        #expect(diagnostics(["path": "relative"])["/path"] != nil)
        #expect(diagnostics(["path": "/x", "base64": "***"])["/base64"] != nil)
    }

    @Test(arguments: ["\u{0}", "\r", "\n", "\t", "\u{1B}", "\u{7F}"])
    func controlCharactersAnywhereInTheURLOrAHeaderAreRefusedAtTheirMember(control: String) {
        let found = diagnostics([
            "path": .string("/a\(control)b/{id}/{list}/{map}"),
            "pathParams": [
                "id": .string("x\(control)"), "list": ["ok", .string("\(control)")], "map": ["k": .string(control)],
            ],
            "query": [.init("n\(control)"): "v", "v": .string("a\(control)"), "list": ["ok", .string(control)]],
            "headers": ["X-Value": .string("a\(control)b")],
        ])
        #expect(found["/path"] != nil)
        #expect(found["/pathParams/id"] != nil)
        #expect(found["/pathParams/list/1"] != nil)
        #expect(found["/pathParams/map/k"] != nil)
        #expect(found[ParamDiagnostic.pointer(["query", "n\(control)"])] != nil)
        #expect(found["/query/v"] != nil)
        #expect(found["/query/list/1"] != nil)
        #expect((found["/headers/X-Value"] != nil) == (control != "\t"), "a tab is allowed inside a header value")
        #expect(diagnostics(["url": .string("http://other:1\(control)@api.example.com/x")])["/url"] != nil)
        #expect(throws: RPCError.self) {
            try RequestParams.decodeSubscription(["path": "/e", "lastEventId": .string("4\(control)1")])
        }
    }

    @Test(arguments: [
        "Content-Length", "transfer-encoding", "Host", "CONNECTION", "Keep-Alive", "Upgrade", "TE", "Trailer",
        "Proxy-Authorization", "Proxy-Connection", ":authority",
    ])
    func framingAndHopByHopHeadersAreRefusedForRequestAndSubscribe(name: String) {
        let found = diagnostics(["method": "POST", "path": "/x", "headers": [.init(name): "0"], "text": "body"])
        #expect(found[ParamDiagnostic.pointer(["headers", name])]?.contains("transport sets it") == true)
        #expect(throws: RPCError.self) {
            try RequestParams.decodeSubscription(["path": "/e", "headers": [.init(name): "0"]])
        }
    }

    @Test func subscribeRefusesBodiesAndMethods() throws {
        #expect(throws: RPCError.self) { try RequestParams.decodeSubscription(["path": "/e", "method": "POST"]) }
        #expect(throws: RPCError.self) { try RequestParams.decodeSubscription(["path": "/e", "json": 1]) }
        let params = try RequestParams.decodeSubscription(["path": "/e", "lastEventId": "41"])
        #expect(params.lastEventID == "41")
    }
}

@Suite struct ResponseEncodingTests {
    @Test func headersAreLowerCasedJoinedAndSetCookieIsAnArray() {
        let headers = HTTPHeaders([
            ("Content-Type", "text/plain"), ("X-A", "1"), ("x-a", "2"), ("Set-Cookie", "a=1"), ("set-cookie", "b=2"),
        ])
        let object = ResponseEncoding.headerObject(headers)
        #expect(object["content-type"] == "text/plain")
        #expect(object["x-a"] == "1, 2")
        #expect(object["set-cookie"] == ["a=1", "b=2"])
        #expect(object.keys == ["content-type", "x-a", "set-cookie"], "in the order each name first came")
    }

    @Test(arguments: [
        (" Application/JSON ; charset=utf-8", "application/json"), ("\ttext/plain\t", "text/plain"),
        ("text/html", "text/html"), ("", ""), (" ; x=1", ""), ("\u{212A}/x", "\u{212A}/x"),
    ])
    func theMediaTypeIsTheTrimmedASCIILowerCasedPartBeforeParameters(contentType: String, mediaType: String) {
        #expect(ResponseEncoding.mediaType(contentType) == mediaType)
    }

    @Test func aLoneSetCookieIsAnArrayOfOne() {
        let object = ResponseEncoding.headerObject(HTTPHeaders([("Set-Cookie", "a=1; Expires=Wed, 21 Oct 2026")]))
        #expect(object["set-cookie"] == ["a=1; Expires=Wed, 21 Oct 2026"])
    }

    @Test func manyFieldsKeepTheirOrderAndRepeatsPastTheLinearScan() {
        // 40 distinct names (past the 32 scanned linearly), each sent twice in different cases.
        let names = (0..<40).map { "X-Field-\($0)" }
        let headers = HTTPHeaders(names.map { ($0, "a") } + names.map { ($0.uppercased(), "b") })
        let object = ResponseEncoding.headerObject(headers)
        #expect(object.count == 40)
        #expect(names.allSatisfy { object[$0.lowercased()] == "a, b" })
        #expect(ResponseEncoding.asciiLowercased("Content-Type") == "content-type")
        #expect(ResponseEncoding.asciiLowercased("X-Ünïcode") == "x-Ünïcode")
    }

    @Test(arguments: [
        ("application/json", #"{"a":12345678901234567890}"#, "json"),
        ("application/problem+json; charset=utf-8", #"{"a":1}"#, "json"),
        ("application/json", "not json", "text"),
        ("text/html; charset=utf-8", "<p>é</p>", "text"),
        ("application/xml", "<a/>", "text"),
        ("application/octet-stream", "abc", "base64"),
        ("", "abc", "base64"),
    ])
    func bodiesAreClassifiedByContentType(contentType: String, body: String, expected: String) {
        let encoded = ResponseEncoding.body(Array(body.utf8), contentType: contentType.isEmpty ? nil : contentType)
        #expect(encoded.member == expected)
        if case .json(let text) = encoded { #expect(String(decoding: text.bytes, as: UTF8.self) == body) }
        if case .text(let text) = encoded { #expect(text == body) }
    }

    @Test func invalidUTF8TextIsBase64AndEmptyBodiesHaveNoBodyField() {
        #expect(ResponseEncoding.body([0xFF, 0xFE, 0x00], contentType: "text/plain") == .base64("//4A"))
        let result = ResponseEncoding.result(HTTPResponse(status: 204), elapsed: .milliseconds(3)).resultValue
        #expect(result["status"] == 204)
        #expect(result["json"] == nil && result["text"] == nil && result["base64"] == nil)
        #expect(result["elapsedMs"]?.numberValue?.doubleValue == 3)
    }
}
