import TestSupport
import Testing
import TokenRelayHTTPFields

@testable import TokenRelayConfig

/// One config mistake and the diagnostic it must produce.
struct DiagnosticCase: CustomTestStringConvertible, Sendable {
    var name: String
    var yaml: String
    var line: Int
    var fragment: String
    var severity: DiagnosticSeverity = .error
    var testDescription: String { name }
}

private let cc = "type: client_credentials\ntoken_url: https://auth.example.com/token\nclient_id: c\n"

@Suite struct SettingsDiagnosticsTests {
    static let profileCases: [DiagnosticCase] = [
        .init(
            name: "typo in an OAuth key", yaml: profileConfig(cc + "clent_secret: { env: S }"), line: 10,
            fragment: "did you mean 'client_secret'?"),
        .init(name: "missing type", yaml: profileConfig("client_id: x"), line: 7, fragment: "needs a 'type'"),
        .init(
            name: "unknown type with suggestion", yaml: profileConfig("type: client_credential"), line: 7,
            fragment: "did you mean 'client_credentials'?"),
        .init(name: "profile not a mapping", yaml: profileConfig("[a]"), line: 7, fragment: "must be a mapping"),
        .init(
            name: "no issuer nor token_url", yaml: profileConfig("type: client_credentials\nclient_id: c"), line: 7,
            fragment: "needs 'issuer' (for discovery), 'token_url'"),
        .init(
            name: "missing client_id", yaml: profileConfig("type: client_credentials\nissuer: https://a.example.com"),
            line: 7, fragment: "needs a 'client_id'"),
        .init(
            name: "issuer not http", yaml: profileConfig("type: client_credentials\nissuer: ldap://a\nclient_id: c"),
            line: 8, fragment: "must use http or https"),
        .init(
            name: "token_url plain http off loopback",
            yaml: profileConfig("type: client_credentials\ntoken_url: http://auth.example.com/token\nclient_id: c"),
            line: 8,
            fragment: "'environments.e.profiles.p.token_url' must use https (plain http is allowed only on loopback)"),
        .init(
            name: "issuer plain http off loopback",
            yaml: profileConfig("type: client_credentials\nissuer: http://10.1.2.3\nclient_id: c"), line: 8,
            fragment: "must use https (plain http is allowed only on loopback)"),
        .init(
            name: "basic auth without secret", yaml: profileConfig(cc + "client_auth: client_secret_basic"), line: 10,
            fragment: "needs a 'client_secret'"),
        .init(
            name: "none with a secret", yaml: profileConfig(cc + "client_secret: { env: S }\nclient_auth: none"),
            line: 11, fragment: "'client_auth: none' sends no secret"),
        .init(
            name: "unknown client_auth", yaml: profileConfig(cc + "client_auth: basic"), line: 10,
            fragment: "must be one of client_secret_basic, client_secret_post, none"),
        .init(
            name: "scopes as a map", yaml: profileConfig(cc + "scopes: { a: 1 }"), line: 10,
            fragment: "must be a list of strings or a space-separated string"),
        .init(
            name: "scope item not a string", yaml: profileConfig(cc + "scopes: [read, [x]]"), line: 10,
            fragment: "'environments.e.profiles.p.scopes[1]' must be a string, found a list"),
        .init(
            name: "audience as a list", yaml: profileConfig(cc + "audience: [a]"), line: 10,
            fragment: "must be a string, found a list"),
        .init(
            name: "bad expiry_skew", yaml: profileConfig(cc + "expiry_skew: soon"), line: 10,
            fragment: "must be a duration such as 500ms"),
        .init(
            name: "quoted boolean", yaml: profileConfig(cc + "expose_token: \"yes\""), line: 10,
            fragment: "must be a boolean"),
        .init(
            name: "refresh_token key on client_credentials", yaml: profileConfig(cc + "refresh_token: { env: R }"),
            line: 10, fragment: "'refresh_token' applies to refresh_token profiles"),
        .init(
            name: "refresh_token profile without seed",
            yaml: profileConfig("type: refresh_token\ntoken_url: https://a.example.com/t\nclient_id: c"), line: 7,
            fragment: "needs a 'refresh_token' secret source"),
        .init(
            name: "quoted redirect port",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\nredirect: { port: \"8080\" }"),
            line: 10, fragment: "must be an integer, found a quoted string"),
        .init(
            name: "redirect port out of range",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\nredirect: { port: [8080, 70000] }"
            ),
            line: 10, fragment: "between 0 and 65535"),
        .init(
            name: "redirect_port was replaced",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\nredirect_port: 8080"),
            line: 10, fragment: "replaced by 'redirect: { port: N }'"),
        .init(
            name: "redirect path without slash",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\nredirect: { path: cb }"),
            line: 10, fragment: "must be an absolute path"),
        .init(
            name: "reserved login parameter",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\nparameters:\n  authorization: { state: x }"
            ),
            line: 11, fragment: "set by tokenrelay itself"),
        .init(
            name: "unknown parameter category",
            yaml: profileConfig(
                "type: device_code\nissuer: https://a.example.com\nclient_id: c\nparameters: { refresh: { a: b } }"),
            line: 10, fragment: "unknown key 'refresh'"),
        .init(
            name: "device url on authorization_code",
            yaml: profileConfig(
                "type: authorization_code\nissuer: https://a.example.com\nclient_id: c\ndevice_authorization_url: https://a.example.com/d"
            ), line: 10, fragment: "applies to device_code profiles"),
        .init(
            name: "api_key with header and query",
            yaml: profileConfig("type: api_key\nheader: X-Key\nquery: key\nvalue: { env: K }"), line: 9,
            fragment: "sets both 'header' and 'query'"),
        .init(
            name: "api_key with neither", yaml: profileConfig("type: api_key\nvalue: { env: K }"), line: 7,
            fragment: "needs 'header'"),
        .init(
            name: "api_key bad header name", yaml: profileConfig("type: api_key\nheader: X Key\nvalue: { env: K }"),
            line: 8, fragment: "not a valid HTTP header name"),
        .init(
            name: "api_key header is a framing field",
            yaml: profileConfig("type: api_key\nheader: Content-Length\nvalue: { env: K }"), line: 8,
            fragment: "'Content-Length' is set by the transport"),
        .init(
            name: "api_key header is a pseudo-header",
            yaml: profileConfig("type: api_key\nheader: \":authority\"\nvalue: { env: K }"), line: 8,
            fragment: "is set by the transport"),
        .init(
            name: "api_key without value", yaml: profileConfig("type: api_key\nheader: X-Key"), line: 7,
            fragment: "needs 'value'"),
        .init(
            name: "basic without username", yaml: profileConfig("type: basic\npassword: { env: P }"), line: 7,
            fragment: "needs a 'username'"),
        .init(
            name: "basic without password", yaml: profileConfig("type: basic\nusername: u"), line: 7,
            fragment: "needs 'password'"),
        .init(
            name: "bearer token as a list", yaml: profileConfig("type: bearer\ntoken: [a]"), line: 8,
            fragment: "must be a secret source"),
        .init(
            name: "bearer cache with env", yaml: profileConfig("type: bearer\ntoken: { env: T }\ncache: 5m"), line: 9,
            fragment: "only matters when the token comes from a { command", severity: .warning),
        .init(
            name: "bearer bad cache", yaml: profileConfig("type: bearer\ntoken: { command: [t] }\ncache: often"),
            line: 9, fragment: "must be a duration"),
        .init(
            name: "inline secret", yaml: profileConfig("type: bearer\ntoken: abcdefgh"), line: 8,
            fragment: "inline secret", severity: .warning),
        .init(
            name: "two secret kinds", yaml: profileConfig("type: bearer\ntoken: { env: T, file: t }"), line: 8,
            fragment: "sets env and file; use exactly one"),
        .init(
            name: "empty secret mapping", yaml: profileConfig("type: bearer\ntoken: { timeout: 1s }"), line: 8,
            fragment: "needs one of 'env', 'file' or 'command'"),
        .init(
            name: "command as a string", yaml: profileConfig("type: bearer\ntoken: { command: pass show t }"), line: 8,
            fragment: "must be a list of arguments"),
        .init(
            name: "empty command", yaml: profileConfig("type: bearer\ntoken: { command: [] }"), line: 8,
            fragment: "must name a program"),
        .init(
            name: "timeout on env source", yaml: profileConfig("type: bearer\ntoken: { env: T, timeout: 1s }"), line: 8,
            fragment: "'timeout' only applies to a { command"),
        .init(
            name: "typo in secret source", yaml: profileConfig("type: bearer\ntoken: { evn: T }"), line: 8,
            fragment: "did you mean 'env'?"),
        .init(
            name: "bad env name", yaml: profileConfig("type: bearer\ntoken: { env: 1X }"), line: 8,
            fragment: "not a valid environment variable name"),
        .init(
            name: "duplicate key", yaml: profileConfig("type: bearer\ntoken: { env: T }\ntoken: { env: U }"), line: 9,
            fragment: "duplicate key 'token'"),
    ]

    static let environmentCases: [DiagnosticCase] = [
        .init(
            name: "setting not indented under its environment",
            yaml: "version: 1\nenvironments:\n  prod:\n  base_url: https://p\n", line: 4,
            fragment: "indent it under its environment"),
        .init(
            name: "empty environment", yaml: "version: 1\nenvironments:\n  prod:\n", line: 3,
            fragment: "environment 'prod' is empty"),
        .init(
            name: "setting not indented under its profile", yaml: environmentConfig("profiles:\n  p:\n  type: bearer"),
            line: 7, fragment: "indent it under its profile"),
        .init(
            name: "missing base_url", yaml: "version: 1\nenvironments:\n  e:\n    timeout: 5s\n", line: 4,
            fragment: "needs a 'base_url'"),
        .init(
            name: "base_url with query", yaml: "version: 1\nenvironments:\n  e:\n    base_url: https://h/x?a=1\n",
            line: 4, fragment: "must not contain a query"),
        .init(
            name: "base_url relative", yaml: "version: 1\nenvironments:\n  e:\n    base_url: /api\n", line: 4,
            fragment: "base_url"),
        .init(
            name: "bad timeout", yaml: environmentConfig("timeout: 10 parsecs"), line: 5,
            fragment: "'environments.e.timeout' must be a duration"),
        .init(name: "zero timeout", yaml: environmentConfig("timeout: 0s"), line: 5, fragment: "longer than zero"),
        .init(
            name: "bad header name", yaml: environmentConfig("headers: { \"Bad Header\": x }"), line: 5,
            fragment: "not a valid HTTP header name"),
        .init(
            name: "framing header", yaml: environmentConfig("headers: { Transfer-Encoding: chunked }"), line: 5,
            fragment: "header 'Transfer-Encoding' in 'environments.e.headers' is set by the transport"),
        .init(
            name: "hop-by-hop header", yaml: environmentConfig("headers:\n  X-A: a\n  connection: close"), line: 7,
            fragment: "header 'connection' in 'environments.e.headers' is set by the transport"),
        .init(
            name: "Proxy-* header", yaml: environmentConfig("headers: { Proxy-Authorization: Basic eA== }"), line: 5,
            fragment: "'Proxy-Authorization' in 'environments.e.headers' is set by the transport"),
        .init(
            name: "pseudo-header", yaml: environmentConfig("headers: { \":path\": /admin }"), line: 5,
            fragment: "':path' in 'environments.e.headers' is set by the transport"),
        .init(
            name: "header value with CR LF", yaml: environmentConfig("headers: { X-A: \"a\\r\\nX-B: b\" }"), line: 5,
            fragment: "header 'X-A' must not contain line breaks or NUL"),
        .init(
            name: "header value with NUL", yaml: environmentConfig("headers: { X-A: \"a\\0b\" }"), line: 5,
            fragment: "header 'X-A' must not contain line breaks or NUL"),
        .init(
            name: "headers as a list", yaml: environmentConfig("headers: [a]"), line: 5,
            fragment: "must be a mapping of names"),
        .init(
            name: "origin with a path", yaml: environmentConfig("allowed_origins: [https://h/path]"), line: 5,
            fragment: "without a path"),
        .init(
            name: "origins as a string", yaml: environmentConfig("allowed_origins: https://h"), line: 5,
            fragment: "must be a list of strings"),
        .init(
            name: "missing ca_file", yaml: environmentConfig("ca_file: ca.pem"), line: 5,
            fragment: "/cfg/ca.pem does not exist"),
        .init(name: "bad proxy", yaml: environmentConfig("proxy: ftp://p"), line: 5, fragment: "must use one of http"),
        .init(
            name: "bad size", yaml: environmentConfig("max_response_bytes: lots"), line: 5, fragment: "must be a size"),
        .init(name: "events typo", yaml: environmentConfig("events: { idle: 3s }"), line: 5, fragment: "did you mean"),
        .init(
            name: "environment typo", yaml: environmentConfig("timout: 3s"), line: 5,
            fragment: "unknown key 'timout' in environment 'e'; did you mean 'timeout'?"),
        .init(
            name: "unknown default_profile",
            yaml: environmentConfig(
                "default_profile: servce\nprofiles:\n  service: { type: bearer, token: { env: T } }"), line: 5,
            fragment: "did you mean 'service'?"),
    ]

    static let topCases: [DiagnosticCase] = [
        .init(name: "missing version", yaml: "environments: {}\n", line: 1, fragment: "missing required key 'version'"),
        .init(name: "wrong version", yaml: "version: 2\n", line: 1, fragment: "unsupported config 'version' 2"),
        .init(
            name: "quoted version", yaml: "version: \"1\"\n", line: 1,
            fragment: "must be an integer, found a quoted string"),
        .init(
            name: "top-level typo", yaml: "version: 1\nenvironmnts: {}\n", line: 2,
            fragment: "did you mean 'environments'?"),
        .init(name: "top is a list", yaml: "- a\n", line: 1, fragment: "must be a mapping"),
        .init(name: "empty file", yaml: "# nothing\n", line: 1, fragment: "the config file is empty"),
        .init(
            name: "unknown default environment",
            yaml: "version: 1\ndefault_environment: prod\nenvironments:\n  production: { base_url: https://p }\n",
            line: 2, fragment: "did you mean 'production'?"),
        .init(
            name: "memory with path", yaml: "version: 1\nstore: { type: memory, path: x.db }\n", line: 2,
            fragment: "'store.path' only applies to 'type: sqlite'"),
        .init(
            name: "unknown store type", yaml: "version: 1\nstore: { type: redis }\n", line: 2,
            fragment: "must be one of memory, sqlite"),
        .init(
            name: "zero concurrency", yaml: "version: 1\nserver: { max_concurrent_requests: 0 }\n", line: 2,
            fragment: "between 1 and"),
        .init(
            name: "bad message size", yaml: "version: 1\nserver: { max_message_bytes: 12 parsecs }\n", line: 2,
            fragment: "must be a size"),
        .init(name: "tab indentation", yaml: "version: 1\nenvironments:\n\te: {}\n", line: 3, fragment: "tabs"),
        .init(name: "second document", yaml: "version: 1\n---\nversion: 1\n", line: 2, fragment: "single document"),
        .init(
            name: "duplicate environment",
            yaml: "version: 1\nenvironments:\n  e: { base_url: https://a }\n  e: { base_url: https://b }\n", line: 4,
            fragment: "duplicate name 'e'"),
    ]

    @Test(arguments: profileCases + environmentCases + topCases)
    func mistakeIsReportedAtItsLine(_ mistake: DiagnosticCase) async {
        let result = await decodeConfig(mistake.yaml, mode: .check(resolveSecrets: false))
        let matching = result.diagnostics.filter { $0.message.contains(mistake.fragment) }
        #expect(matching.count >= 1, "got \(result.diagnostics.map(\.rendered))")
        #expect(matching.first?.line == mistake.line, "got \(result.diagnostics.map(\.rendered))")
        #expect(matching.first?.severity == mistake.severity)
        #expect(matching.first?.rendered.hasPrefix("\(testConfigPath):\(mistake.line):") == true)
        if mistake.severity == .error {
            #expect(result.settings == nil)
        } else {
            #expect(!result.hasErrors, "got \(result.diagnostics.map(\.rendered))")
        }
    }

    /// Every field the transport refuses to send (HTTPFieldRules, the one list) is refused at load,
    /// in an environment's `headers` (at the name) and as an `api_key` profile's `header` (at the
    /// value), so the mistake is reported in the file rather than as a caller's -32602 later.
    @Test(arguments: HTTPFieldRules.reservedNames.sorted() + ["Proxy-Authorization", "PROXY-Connection", ":method"])
    func fieldsTheTransportSetsAreRefusedAtLoad(name: String) async throws {
        let quoted = "\"\(name)\""
        let environment = await decodeConfig(environmentConfig("headers: { \(quoted): x }"))
        let onName = try #require(environment.errors.first, "\(name) was accepted in headers")
        #expect(onName.mark == SourceMark(line: 5, column: 16))
        #expect(onName.message.contains("is set by the transport"))
        #expect(environment.settings == nil)

        let profile = await decodeConfig(
            profileConfig("type: api_key\nheader: \(quoted)\nvalue: { env: K }"), environment: ["K": "k"])
        let onValue = try #require(profile.errors.first, "\(name) was accepted as an api_key header")
        #expect(onValue.mark == SourceMark(line: 8, column: 17))
        #expect(onValue.message.contains("is set by the transport"))
        #expect(profile.settings == nil)
    }

    @Test func ordinaryHeadersAndAnAPIKeyHeaderStillLoad() async {
        let environment = await decodeConfig(
            environmentConfig("headers: { X-Trace: \"a\\tb\", Authorization-Hint: y, Proxyish: z }"))
        #expect(environment.errors.isEmpty, "got \(environment.errors.map(\.rendered))")
        #expect(
            environment.settings?.environments.first?.headers.map(\.name) == [
                "X-Trace", "Authorization-Hint", "Proxyish",
            ])
        let profile = await decodeConfig(
            profileConfig("type: api_key\nheader: X-API-Key\nvalue: { env: K }"), environment: ["K": "k"])
        #expect(profile.errors.isEmpty, "got \(profile.errors.map(\.rendered))")
    }

    @Test func unknownKeyPointsAtTheKeyItself() async throws {
        let result = await decodeConfig(environmentConfig("timout: 3s"))
        let diagnostic = try #require(result.errors.first)
        #expect(diagnostic.mark == SourceMark(line: 5, column: 5))
    }

    @Test func unknownKeyFarFromAnyGetsTheListOfKeys() async throws {
        let result = await decodeConfig("version: 1\nserver: { banana: 1 }\n")
        #expect(result.errors.first?.message.contains("expected one of: max_concurrent_requests") == true)
    }

    @Test(arguments: [
        ("64MiB", 64 << 20), ("512KiB", 512 << 10), ("1MB", 1_000_000), ("1024", 1024), ("2 GiB", 2 << 30),
    ])
    func sizesAcceptUnits(text: String, bytes: Int) async {
        let result = await decodeConfig("version: 1\nserver: { max_message_bytes: \(text) }\n")
        #expect(result.settings?.server.maxMessageBytes == bytes)
    }
}
