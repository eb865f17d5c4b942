import Testing
import TokenRelayHTTPFields

@testable import TokenRelayHTTP

@Suite struct EncodingTests {
    @Test func queryEncodesEverythingButUnreservedWithSpaceAsPercent20() {
        #expect(RequestURL.query([("a b", "c&d=e"), ("x", "ü+/~")]) == "a%20b=c%26d%3De&x=%C3%BC%2B%2F~")
    }

    @Test(arguments: [
        ("https://h/p", "https://h/p?k=v&r=1"),
        ("https://h/p?a=1", "https://h/p?a=1&k=v&r=1"),
        ("https://h/p?", "https://h/p?k=v&r=1"),
        ("https://h/p?a=1&", "https://h/p?a=1&k=v&r=1"),
        ("https://h/p#frag", "https://h/p?k=v&r=1#frag"),
    ])
    func queryIsAppendedToAnyURL(url: String, expected: String) {
        #expect(RequestURL.appendingQuery([("k", "v"), ("r", "1")], to: url) == expected)
    }

    @Test func repeatedKeysStayInOrder() {
        #expect(RequestURL.appendingQuery([("b", "1"), ("b", "2")], to: "http://h/") == "http://h/?b=1&b=2")
        #expect(RequestURL.appendingQuery([], to: "http://h/") == "http://h/")
    }

    @Test(arguments: [
        ("https://h/api/v1", "/items", "https://h/api/v1/items"),
        ("https://h/api/v1/", "/items", "https://h/api/v1/items"),
        ("https://h/api/v1/", "items", "https://h/api/v1/items"),
        ("https://h", "/items", "https://h/items"),
        ("https://h/", "/", "https://h/"),
        ("https://h/api", "", "https://h/api"),
        ("https://h/api", "/items?a=1", "https://h/api/items?a=1"),
        ("https://h/api", "?a=1", "https://h/api?a=1"),
        ("https://h/api?ignored=1", "/x", "https://h/api/x"),
        ("https://h/api#frag", "x", "https://h/api/x"),
        ("https://h//", "//x", "https://h/x"),
        ("https://h/api", "#f", "https://h/api#f"),
        ("https://h/é", "/ü", "https://h/é/ü"),
        ("http://", "/x", "http:///x"),
    ])
    func joinsBaseAndPathWithOneSlash(base: String, path: String, expected: String) {
        #expect(RequestURL.join(base: base, path: path) == expected)
    }

    @Test func formEncodingFollowsTheWHATWGSerializer() {
        let encoded = FormEncoding.encode([
            ("grant_type", "client_credentials"), ("scope", "read write"), ("x", "*-._~!'()/é&=+"),
        ])
        #expect(encoded == "grant_type=client_credentials&scope=read+write&x=*-._%7E%21%27%28%29%2F%C3%A9%26%3D%2B")
    }

    @Test func formDecodingInvertsEncoding() {
        let pairs = [("a b", "c+d"), ("empty", ""), ("ü", "%zz")]
        let decoded = FormEncoding.decode(FormEncoding.encode(pairs))
        #expect(decoded.map(\.0) == pairs.map(\.0))
        #expect(decoded.map(\.1) == pairs.map(\.1))
        #expect(FormEncoding.decode("a=%zz&b").map(\.1) == ["%zz", ""])
    }
}

@Suite struct OriginTests {
    @Test(arguments: [
        ("https://API.Example.com/x", Origin(scheme: "https", host: "api.example.com", port: 443)),
        ("HTTP://h:8080?q", Origin(scheme: "http", host: "h", port: 8080)),
        ("http://api.exam%70le.com/x", Origin(scheme: "http", host: "api.example.com", port: 80)),
        ("http://127.1:8080/", Origin(scheme: "http", host: "127.0.0.1", port: 8080)),
        ("http://0x7f.0.0.1/", Origin(scheme: "http", host: "127.0.0.1", port: 80)),
        ("http://[fe80::1%25eth0]:8080/", Origin(scheme: "http", host: "[fe80::1%eth0]", port: 8080)),
        ("https://[::1]:8443/", Origin(scheme: "https", host: "[::1]", port: 8443)),
        ("https://[::1]", Origin(scheme: "https", host: "[::1]", port: 443)),
        ("http://127.0.0.1#f", Origin(scheme: "http", host: "127.0.0.1", port: 80)),
    ])
    func parsesOrigins(url: String, origin: Origin) {
        #expect(Origin(url: url) == origin)
    }

    @Test(arguments: [
        "ftp://h/", "/relative", "https://", "https://h:99999/", "https://h:8x/", "mailto:a@b", "https://[::1/",
        "http://user:pw@h.example/p", "http://other:1\u{0}@api.example.com/x", "http://api.example.com\\@other/",
        "http://other\\api.example.com/", "http://api.example.com\t/x", "http://a b/", "http://h\r\n/",
        "http://h%00x/", "http://h%2fx/",
    ])
    func rejectsNonHTTPOrMalformedURLs(url: String) {
        #expect(Origin(url: url) == nil)
    }

    @Test func defaultPortEqualsExplicitPort() {
        #expect(Origin(url: "https://h/") == Origin(url: "https://h:443/a"))
        #expect(Origin(url: "https://h/") != Origin(url: "http://h/"))
        #expect(Origin(url: "https://h/") != Origin(url: "https://h:8443/"))
    }
}

@Suite struct ParsedURLTests {
    @Test func theTextIsLibcurlsNormalisedURLWithoutFragment() throws {
        let parsed = try ParsedURL("HTTP://API.example.com:80/a/../b?q=1#frag")
        #expect(parsed.text == "http://API.example.com:80/b?q=1")
        #expect(parsed.root == "http://API.example.com:80")
        #expect(parsed.path == "/b" && parsed.query == "q=1" && parsed.hadFragment)
        #expect(parsed.origin == Origin(scheme: "http", host: "api.example.com", port: 80))
    }

    @Test(arguments: [
        ("http://other:1\u{0}@api.example.com/x", URLProblem.controlCharacter),
        ("http://api.example.com/\u{7F}", URLProblem.controlCharacter),
        ("http://u:p@h/", URLProblem.userInfo),
        ("http://h\\@other/", URLProblem.userInfo),
        ("ftp://h/", URLProblem.unsupportedScheme),
        ("h/x", URLProblem.unsupportedScheme),
    ])
    func refusalsSayWhy(url: String, problem: URLProblem) {
        #expect(throws: problem) { try ParsedURL(url) }
    }

    @Test(arguments: [
        ("http://127.0.0.1/", true), ("http://127.1/", true), ("http://127.255.0.9:1/", true), ("http://0x7f.1/", true),
        ("http://localhost:8/", true), ("http://LOCALHOST/", true), ("http://api.localhost/", true),
        ("http://LOCALHOST./", false), ("http://api.localhost./", false), ("http://127.0.0.1./", false),
        ("http://[::1]/", true), ("http://[0:0:0:0:0:0:0:1]/", true), ("http://[::ffff:127.0.0.1]/", true),
        ("http://128.0.0.1/", false), ("http://[::2]/", false), ("http://localhost.example/", false),
        ("http://10.0.0.1/", false), ("http://example.com/", false), ("http://[::ffff:10.0.0.1]/", false),
    ])
    func loopbackIsDecidedOnTheHostLibcurlConnectsTo(url: String, loopback: Bool) throws {
        #expect(try ParsedURL(url).isLoopback == loopback)
    }

    @Test(
        arguments: [
            ("http://h", "http://h/", "/", nil, false),
            ("http://h/a/b?x=1&y=2", "http://h/a/b?x=1&y=2", "/a/b", "x=1&y=2", false),
            ("https://h:8443/a?b#c", "https://h:8443/a?b", "/a", "b", true),
            ("http://h/a#", "http://h/a", "/a", nil, false),  // libcurl: an empty fragment is none
            ("http://h/a%23b?q=%23", "http://h/a%23b?q=%23", "/a%23b", "q=%23", false),
            ("http://[::1]:9/p", "http://[::1]:9/p", "/p", nil, false),
        ] as [(String, String, String, String?, Bool)])
    func pathQueryAndFragmentAreLibcurlsParts(url: String, text: String, path: String, query: String?, fragment: Bool)
        throws
    {
        let parsed = try ParsedURL(url)
        #expect(parsed.text == text)
        #expect(parsed.path == path)
        #expect(parsed.query == query)
        #expect(parsed.hadFragment == fragment)
    }

    @Test func anIPv6ZoneIDIsPartOfTheOrigin() throws {
        let parsed = try ParsedURL("http://[fe80::1%25eth0]:8080/x")
        #expect(parsed.zoneID == "eth0")
        #expect(parsed.origin == Origin(scheme: "http", host: "[fe80::1%eth0]", port: 8080))
        #expect(try ParsedURL("http://[fe80::1]:8080/x").zoneID == nil)
    }

    @Test func aRequestKeepsItsParseUntilItsURLChangesThenIsParsedAgain() throws {
        let parsed = try ParsedURL("http://api.example.com/a?x=1")
        var request = HTTPRequest(method: "GET", parsedURL: parsed)
        #expect(request.url == parsed.text)
        // The origin checks and the transfer use the very handle that was parsed.
        #expect(try request.targetURL().handle === parsed.handle)
        // A middleware that rewrites the URL (an API key in the query, another host) is not
        // judged or sent by the old parse.
        request.url = "http://other.example.com/a?x=1&key=k"
        let fresh = try request.targetURL()
        #expect(fresh.handle !== parsed.handle)
        #expect(fresh.origin == Origin(scheme: "http", host: "other.example.com", port: 80))
        #expect(fresh.text == "http://other.example.com/a?x=1&key=k")
        let policy = OriginPolicy([parsed.origin])
        #expect(!policy.allows(request))
        request.url = parsed.text
        #expect(policy.allows(request))
    }
}

@Suite struct HTTPFieldRulesTests {
    @Test(arguments: [
        "Content-Length", "transfer-encoding", "HOST", "Connection", "Keep-Alive", "Upgrade", "TE", "Trailer",
        "Proxy-Authorization", "proxy-connection", ":path", ":authority",
    ])
    func framingAndHopByHopFieldsAreReserved(name: String) {
        #expect(HTTPFieldRules.isReserved(name))
        #expect(HTTPFieldRules.problem(name: name, value: "x") != nil)
    }

    @Test func ordinaryFieldsPassAndBrokenOnesDoNot() {
        #expect(HTTPFieldRules.problem(name: "X-Trace", value: "a\tb") == nil)
        #expect(HTTPFieldRules.problem(name: "X Trace", value: "a") != nil)
        #expect(HTTPFieldRules.problem(name: "X-Trace", value: "a\r\nb") != nil)
        #expect(HTTPFieldRules.problem(name: "X-Trace", value: "a\u{0}b") != nil)
        #expect(HTTPFieldRules.isCleanValue("a\tb") && !HTTPFieldRules.isCleanValue("a\u{1}b"))
    }

    @Test(arguments: [
        (" \t 120 \t", "120"), ("a b", "a b"), ("  ", ""), ("", ""), (" é ", "é"), ("x\n", "x\n"),
        ("\u{A0}x", "\u{A0}x"),
    ])
    func optionalWhiteSpaceIsSpacesAndTabsOnly(text: String, trimmed: String) {
        #expect(HTTPFieldRules.trimmingWhitespace(text) == trimmed)
        #expect(HTTPFieldRules.trimmingWhitespace(Substring(text)) == trimmed)
    }
}
