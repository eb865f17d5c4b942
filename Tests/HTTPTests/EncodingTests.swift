import Testing

@testable import HTTP

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
        ("http://user:pw@h.example/p", Origin(scheme: "http", host: "h.example", port: 80)),
        ("https://[::1]:8443/", Origin(scheme: "https", host: "[::1]", port: 8443)),
        ("https://[::1]", Origin(scheme: "https", host: "[::1]", port: 443)),
        ("http://127.0.0.1#f", Origin(scheme: "http", host: "127.0.0.1", port: 80)),
    ])
    func parsesOrigins(url: String, origin: Origin) {
        #expect(Origin(url: url) == origin)
    }

    @Test(arguments: [
        "ftp://h/", "/relative", "https://", "https://h:99999/", "https://h:8x/", "mailto:a@b", "https://[::1/",
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
