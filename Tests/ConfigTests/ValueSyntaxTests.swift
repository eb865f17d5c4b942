import Testing
import TokenRelayHTTPFields

@testable import TokenRelayConfig

@Suite struct ValueSyntaxTests {
    @Test(arguments: [
        ("500ms", Duration.milliseconds(500)), ("30s", .seconds(30)), ("5m", .seconds(300)), ("1h", .seconds(3600)),
        ("1m30s", .seconds(90)), ("45", .seconds(45)), ("0", .zero),
        // Spaces and tabs around the value are trimmed (CharacterSet.whitespaces' set), newlines not.
        (" 30s\t", .seconds(30)), ("\u{00A0}5m", .seconds(300)),
        // Parts in any order, and the largest amount a part may have.
        ("1h2m3s4ms", .seconds(3723) + .milliseconds(4)), ("30s1m", .seconds(90)),
        ("999999999s", .seconds(999_999_999)),
        ("+5", .seconds(5)),
    ])
    func durationsParse(text: String, expected: Duration) {
        #expect(ValueSyntax.duration(text) == expected)
    }

    @Test(arguments: [
        "", "s", "10x", "-5s", "1.5s", "5 m", "ms10", "30s\n", " ", "1m30", "30S", "1000000000s", "5mm", "\u{0661}s",
        "5\u{00B5}s", "5s\u{0301}",
    ])
    func invalidDurationsAreRefused(text: String) {
        #expect(ValueSyntax.duration(text) == nil)
    }

    @Test(arguments: ["12 parsecs", "MiB", "-1", "99999999999999999999GiB", "1.5MiB"])
    func invalidSizesAreRefused(text: String) {
        #expect(ValueSyntax.size(text) == nil)
    }

    @Test(arguments: [("1024", 1024), (" 2 KiB ", 2048), ("3MB", 3_000_000), ("\t1 GiB", 1 << 30)])
    func sizesParseWithSpacesAroundAndBeforeTheUnit(text: String, expected: Int) {
        #expect(ValueSyntax.size(text) == expected)
    }

    @Test func suggestionsFindTyposOnly() {
        #expect(ValueSyntax.suggestion(for: "clent_id", among: ["client_id", "issuer"]) == "client_id")
        #expect(ValueSyntax.suggestion(for: "banana", among: ["client_id", "issuer"]) == nil)
        #expect(ValueSyntax.editDistance("kitten", "sitting") == 3)
    }

    @Test func pathsExpandHomeAndResolveAgainstTheConfigFolder() {
        #expect(ValueSyntax.expandPath("~/x", home: "/h", base: "/cfg") == "/h/x")
        #expect(ValueSyntax.expandPath("x/y", home: "/h", base: "/cfg") == "/cfg/x/y")
        #expect(ValueSyntax.expandPath("/abs", home: "/h", base: "/cfg") == "/abs")
        #expect(ValueSyntax.expandPath("~other/x", home: "/h", base: "/cfg") == nil)
        #expect(ValueSyntax.folder(of: "config.yaml") == ".")
        #expect(ValueSyntax.folder(of: "/config.yaml") == "/")
    }

    @Test(arguments: ["http://a b/", "http://h\\@other/", "http://h/\u{7F}", "http://h\t/", "http://h\u{0}@x/"])
    func urlsThatParsersMayReadDifferentlyAreRefused(url: String) {
        #expect(ValueSyntax.httpURLProblem(url) == "must not contain spaces, control characters or backslashes")
    }

    @Test(arguments: [
        "https://api.example.com", "https://api.example.com/v1", "HTTP://127.0.0.1:8080/", "https://[::1]:8443/x",
        "https://h:/", "https://bücher.example/",
    ])
    func absoluteHTTPURLsAreAccepted(url: String) {
        #expect(ValueSyntax.httpURLProblem(url) == nil)
    }

    @Test(arguments: [
        ("api.example.com/v1", "is not a valid absolute URL"), ("1http://h/", "is not a valid absolute URL"),
        ("https://h:80x/", "is not a valid absolute URL"), ("https://[::1/", "is not a valid absolute URL"),
        ("ftp://h/", "must use http or https, not 'ftp'"), ("https:/h/x", "has no host"), ("https:///x", "has no host"),
        ("https://u:p@h/", "must not contain credentials (user:password@); use a profile instead"),
        ("https://h/x?a=1", "must not contain a query ('?...')"),
        ("https://h/x#f", "must not contain a fragment ('#...')"),
        ("https://h/a@b?c", "must not contain a query ('?...')"),
    ])
    func urlProblemsAreNamed(url: String, problem: String) {
        #expect(ValueSyntax.httpURLProblem(url) == problem)
    }

    @Test(arguments: [
        ("https://auth.example.com/token", true), ("HTTPS://auth.example.com/o", true),
        ("http://127.0.0.1:8000/o/token/", true), ("http://127.9.9.9/t", true), ("http://localhost/t", true),
        ("http://LOCALHOST/t", true), ("http://id.localhost:1/t", true), ("http://[::1]:8/t", true),
        ("http://[::ffff:127.0.0.1]/t", true), ("http://auth.example.com/token", false), ("http://10.0.0.1/t", false),
        ("http://[::2]/t", false), ("http://localhost.example/t", false), ("http://127.0.0.1.example/t", false),
        // A trailing dot goes to DNS (libcurl resolves only `localhost` and `*.localhost` itself).
        ("http://localhost./t", false), ("http://127.0.0.1./t", false),
    ])
    func oauthEndpointsUseHTTPSOrLoopback(url: String, allowed: Bool) {
        #expect(
            ValueSyntax.endpointURLProblem(url)
                == (allowed ? nil : "must use https (plain http is allowed only on loopback)"))
        // The rule the advisory check applies when a session registers, on the same split.
        #expect(URLSyntax(url)?.isAllowedEndpoint == allowed)
    }

    @Test func endpointURLsAreHTTPURLsFirst() {
        #expect(ValueSyntax.endpointURLProblem("ftp://h/") == "must use http or https, not 'ftp'")
        #expect(
            ValueSyntax.endpointURLProblem("http://u:p@127.0.0.1/")
                == "must not contain credentials (user:password@); use a profile instead")
    }

    @Test func originsHaveNoPathAndProxiesNeedAKnownScheme() {
        #expect(ValueSyntax.originProblem("https://files.example.com") == nil)
        #expect(ValueSyntax.originProblem("https://files.example.com/") == nil)
        #expect(
            ValueSyntax.originProblem("https://files.example.com/x")
                == "must be an origin (scheme://host[:port]) without a path")
        #expect(ValueSyntax.proxyProblem("socks5h://127.0.0.1:1080") == nil)
        #expect(
            ValueSyntax.proxyProblem("gopher://h")
                == "must use one of http, https, socks4, socks4a, socks5, socks5h, not 'gopher'")
        #expect(ValueSyntax.proxyProblem("http://:3128") == "has no host")
    }
}
