import Testing

@testable import TokenRelayHTTP

/// RFC 6570 examples: §1.2 (levels 1-3) and §3.2 with its variable table.
@Suite struct URITemplateTests {
    static let variables: [String: URITemplateValue] = [
        "count": ["one", "two", "three"],
        "dom": ["example", "com"],
        "dub": "me/too",
        "hello": "Hello World!",
        "half": "50%",
        "var": "value",
        "who": "fred",
        "base": "http://example.com/home/",
        "path": "/foo/bar",
        "list": ["red", "green", "blue"],
        "keys": ["semi": ";", "dot": ".", "comma": ","],
        "v": "6",
        "x": "1024",
        "y": "768",
        "empty": "",
        "empty_keys": .associative([]),
    ]

    static let levels1To3: [(String, String)] = [
        ("{var}", "value"), ("{hello}", "Hello%20World%21"),
        ("{+var}", "value"), ("{+hello}", "Hello%20World!"), ("{+path}/here", "/foo/bar/here"),
        ("here?ref={+path}", "here?ref=/foo/bar"), ("X{#var}", "X#value"), ("X{#hello}", "X#Hello%20World!"),
        ("map?{x,y}", "map?1024,768"), ("{x,hello,y}", "1024,Hello%20World%21,768"),
        ("{+x,hello,y}", "1024,Hello%20World!,768"), ("{+path,x}/here", "/foo/bar,1024/here"),
        ("{#x,hello,y}", "#1024,Hello%20World!,768"), ("{#path,x}/here", "#/foo/bar,1024/here"),
        ("X{.var}", "X.value"), ("X{.x,y}", "X.1024.768"), ("{/var}", "/value"), ("{/var,x}/here", "/value/1024/here"),
        ("{;x,y}", ";x=1024;y=768"), ("{;x,y,empty}", ";x=1024;y=768;empty"), ("{?x,y}", "?x=1024&y=768"),
        ("{?x,y,empty}", "?x=1024&y=768&empty="), ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{&x,y,empty}", "&x=1024&y=768&empty="),
    ]

    static let section3: [(String, String)] = [
        // 3.2.1 variable expansion
        ("{count}", "one,two,three"), ("{count*}", "one,two,three"), ("{/count}", "/one,two,three"),
        ("{/count*}", "/one/two/three"), ("{;count}", ";count=one,two,three"),
        ("{;count*}", ";count=one;count=two;count=three"), ("{?count}", "?count=one,two,three"),
        ("{?count*}", "?count=one&count=two&count=three"), ("{&count*}", "&count=one&count=two&count=three"),
        // 3.2.2 simple
        ("{half}", "50%25"), ("O{empty}X", "OX"), ("O{undef}X", "OX"), ("?{x,empty}", "?1024,"),
        ("?{x,undef}", "?1024"), ("?{undef,y}", "?768"), ("{var:3}", "val"), ("{var:30}", "value"),
        ("{list}", "red,green,blue"), ("{list*}", "red,green,blue"), ("{keys}", "semi,%3B,dot,.,comma,%2C"),
        ("{keys*}", "semi=%3B,dot=.,comma=%2C"),
        // 3.2.3 reserved
        ("{+half}", "50%25"), ("{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"),
        ("{+base}index", "http://example.com/home/index"), ("O{+empty}X", "OX"), ("O{+undef}X", "OX"),
        ("up{+path}{var}/here", "up/foo/barvalue/here"), ("{+path:6}/here", "/foo/b/here"),
        ("{+list}", "red,green,blue"), ("{+list*}", "red,green,blue"), ("{+keys}", "semi,;,dot,.,comma,,"),
        ("{+keys*}", "semi=;,dot=.,comma=,"),
        // 3.2.4 fragment
        ("{#var}", "#value"), ("{#half}", "#50%25"), ("foo{#empty}", "foo#"), ("foo{#undef}", "foo"),
        ("{#path:6}/here", "#/foo/b/here"), ("{#list}", "#red,green,blue"), ("{#list*}", "#red,green,blue"),
        ("{#keys}", "#semi,;,dot,.,comma,,"), ("{#keys*}", "#semi=;,dot=.,comma=,"),
        // 3.2.5 label
        ("{.who}", ".fred"), ("{.who,who}", ".fred.fred"), ("{.half,who}", ".50%25.fred"),
        ("www{.dom*}", "www.example.com"), ("X{.empty}", "X."), ("X{.undef}", "X"), ("X{.var:3}", "X.val"),
        ("X{.list}", "X.red,green,blue"), ("X{.list*}", "X.red.green.blue"),
        ("X{.keys}", "X.semi,%3B,dot,.,comma,%2C"), ("X{.keys*}", "X.semi=%3B.dot=..comma=%2C"),
        ("X{.empty_keys}", "X"), ("X{.empty_keys*}", "X"),
        // 3.2.6 path segments
        ("{/who}", "/fred"), ("{/who,who}", "/fred/fred"), ("{/half,who}", "/50%25/fred"),
        ("{/who,dub}", "/fred/me%2Ftoo"), ("{/var,empty}", "/value/"), ("{/var,undef}", "/value"),
        ("{/var:1,var}", "/v/value"), ("{/list}", "/red,green,blue"), ("{/list*}", "/red/green/blue"),
        ("{/list*,path:4}", "/red/green/blue/%2Ffoo"), ("{/keys}", "/semi,%3B,dot,.,comma,%2C"),
        ("{/keys*}", "/semi=%3B/dot=./comma=%2C"),
        // 3.2.7 path-style parameters
        ("{;who}", ";who=fred"), ("{;half}", ";half=50%25"), ("{;empty}", ";empty"),
        ("{;v,empty,who}", ";v=6;empty;who=fred"), ("{;v,bar,who}", ";v=6;who=fred"),
        ("{;x,y,undef}", ";x=1024;y=768"), ("{;hello:5}", ";hello=Hello"), ("{;list}", ";list=red,green,blue"),
        ("{;list*}", ";list=red;list=green;list=blue"), ("{;keys}", ";keys=semi,%3B,dot,.,comma,%2C"),
        ("{;keys*}", ";semi=%3B;dot=.;comma=%2C"),
        // 3.2.8 query
        ("{?who}", "?who=fred"), ("{?half}", "?half=50%25"), ("{?x,y,undef}", "?x=1024&y=768"),
        ("{?var:3}", "?var=val"), ("{?list}", "?list=red,green,blue"), ("{?list*}", "?list=red&list=green&list=blue"),
        ("{?keys}", "?keys=semi,%3B,dot,.,comma,%2C"), ("{?keys*}", "?semi=%3B&dot=.&comma=%2C"),
        // 3.2.9 continuation
        ("{&who}", "&who=fred"), ("{&half}", "&half=50%25"), ("{&var:3}", "&var=val"),
        ("{&list}", "&list=red,green,blue"), ("{&list*}", "&list=red&list=green&list=blue"),
        ("{&keys}", "&keys=semi,%3B,dot,.,comma,%2C"), ("{&keys*}", "&semi=%3B&dot=.&comma=%2C"),
    ]

    @Test(arguments: levels1To3)
    func expandsSection1Point2Examples(template: String, expected: String) throws {
        #expect(try URITemplate.expand(template, variables: Self.variables) == expected)
    }

    @Test(arguments: section3)
    func expandsSection3Point2Examples(template: String, expected: String) throws {
        #expect(try URITemplate.expand(template, variables: Self.variables) == expected)
    }

    @Test func encodesNonASCIIAsUTF8AndKeepsTripletsOnlyWhereReservedIsAllowed() throws {
        let variables: [String: URITemplateValue] = ["id": "é/%41 b", "q": "a+b&c"]
        #expect(try URITemplate.expand("/items/{id}", variables: variables) == "/items/%C3%A9%2F%2541%20b")
        #expect(try URITemplate.expand("/items/{+id}", variables: variables) == "/items/%C3%A9/%41%20b")
        #expect(try URITemplate.expand("/s{?q}", variables: variables) == "/s?q=a%2Bb%26c")
        #expect(try URITemplate.expand("/a b/%7e/ü", variables: [:]) == "/a%20b/%7e/%C3%BC")
    }

    @Test func listsItsVariableNames() throws {
        #expect(try URITemplate("/u/{id}/{+rest}{?q,r}").variableNames == ["id", "rest", "q", "r"])
    }

    @Test(arguments: [
        ("/items/{id", URITemplateError.unterminatedExpression(offset: 7)),
        ("/items/id}", .unexpectedClosingBrace(offset: 9)),
        ("/{}", .emptyExpression(offset: 1)),
        ("/{=x}", .reservedOperator("=", offset: 2)),
        ("/{|x}", .reservedOperator("|", offset: 2)),
        ("/{a-b}", .invalidVariableName("a-b", offset: 2)),
        ("/{x,}", .invalidVariableName("", offset: 4)),
        ("/{x:0}", .invalidPrefix("0", offset: 4)),
        ("/{x:10000}", .invalidPrefix("10000", offset: 4)),
        ("/{x:}", .invalidPrefix("", offset: 4)),
    ])
    func malformedTemplatesAreRejected(template: String, error: URITemplateError) {
        #expect(throws: error) { try URITemplate(template) }
    }

    @Test func prefixOnAListIsAnError() {
        #expect(throws: URITemplateError.prefixOnCompositeValue(variable: "list")) {
            try URITemplate.expand("{list:2}", variables: Self.variables)
        }
    }
}
