import Foundation
import Testing

@testable import TokenRelayConfig

/// The `mcp:` rules (SPEC §8): parsing, path normalisation, matching, the decoder and its
/// diagnostics, and what a reload sees.
@Suite struct MCPRulesTests {
    static func rule(_ text: String) throws -> MCPRule { try MCPRule.parse(text).get() }
    static func path(_ text: String) throws -> MCPPath { try MCPPath.normalise(text).get() }

    @Test(arguments: [
        ("GET /repos/**", "GET", "/repos/a/b/c", true),
        ("GET /repos/**", "GET", "/repos", true),
        ("GET /repos/**", "POST", "/repos/a", false),
        ("get /repos/*", "GET", "/repos/a", true),
        ("GET /repos/*", "get", "/repos/a", true),
        ("GET /repos/*", "GET", "/repos/a/b", false),
        ("GET /repos/*", "GET", "/repos/", false),
        ("POST /repos/*/issues", "POST", "/repos/x/issues", true),
        ("POST /repos/*/issues", "POST", "/repos/x/issues/1", false),
        ("* /status", "DELETE", "/status", true),
        ("GET /a/**/z", "GET", "/a/z", true),
        ("GET /a/**/z", "GET", "/a/b/c/z", true),
        ("GET /a/**/z", "GET", "/a/b/c/y", false),
        ("GET /caf%c3%a9", "GET", "/caf%C3%A9", true),
        ("GET /x", "GET", "/%78", true),
        ("GET /", "GET", "/", true),
    ])
    func rulesMatchNormalisedPaths(rule: String, method: String, path: String, expected: Bool) throws {
        let matched = try Self.rule(rule).matches(method: MCPRule.canonicalMethod(method), path: Self.path(path))
        #expect(matched == expected, "\(rule) vs \(method) \(path)")
    }

    @Test(arguments: [
        "/a/../b", "/a/./b", "/a/%2e%2E/b", "/a/%2E/b", "/..", "/a/b%2Fc", "/a/b%2fc", "/a\\b", "/a/%5Cb",
        "/a?x=1", "/a#f", "/a/%zz", "/a/%4", "/a b", "/a/..;x/b", "/a/.;/b", "/a/%00", "/a/é",
        // Path parameters, which Tomcat, Jetty and Spring strip before routing, and empty segments.
        "/admin;x/secret", "/ADMIN;jsessionid=1/secret", "/admin;x", "/repos/x/settings;a/hooks", "/a/%3Bx",
        "/a/b%3bc", "/;x/admin", "/repos/x//issues", "//issues", "/a//",
        // Double encoding, for servers and proxies that decode twice.
        "/admin%252Fsecret", "/a/%252e%252e/b", "/a/%25",
    ])
    func suspiciousPathsAreRefused(path: String) {
        if case .success(let normalised) = MCPPath.normalise(path) {
            Issue.record("\(path) was accepted as \(normalised)")
        }
    }

    @Test func unreservedEscapesAreDecodedAndOthersUpperCased() throws {
        #expect(try Self.path("/%7Euser/%41b%63/x%2a").description == "/~user/Abc/x%2A")
    }

    @Test func denyWinsThenConfirmThenAllow() throws {
        let settings = MCPSettings(
            allow: [try Self.rule("* /repos/**")], deny: [try Self.rule("DELETE /repos/**")],
            confirm: [try Self.rule("POST /repos/*/issues")])
        #expect(
            settings.decide(method: "DELETE", path: try Self.path("/repos/a"))
                == .denied(try Self.rule("DELETE /repos/**")))
        #expect(
            settings.decide(method: "POST", path: try Self.path("/repos/a/issues"))
                == .confirm(try Self.rule("POST /repos/*/issues")))
        #expect(
            settings.decide(method: "GET", path: try Self.path("/repos/a")) == .allowed(try Self.rule("* /repos/**")))
        #expect(settings.decide(method: "GET", path: try Self.path("/users")) == .unlisted)
    }

    @Test(arguments: [
        "/repos/a/SECRET/x", "/repos/a/secret/", "/Repos/a/Secret", "/repos/a/%73ecret", "/repos/a/secre%74/x",
    ])
    func denyRulesCannotBeWalkedAroundByCaseEscapesOrATrailingSlash(path: String) throws {
        let settings = MCPSettings(
            allow: [try Self.rule("GET /**")], deny: [try Self.rule("* /repos/*/secret/**")])
        #expect(
            settings.decide(method: "GET", path: try Self.path(path)) == .denied(try Self.rule("* /repos/*/secret/**")))
    }

    /// `confirm` rules read paths as `deny` rules do: a broad `allow` never sends, unasked, a
    /// call that a server routes to a confirmed path.
    @Test(arguments: [
        ("POST", "/repos/x/issues"), ("POST", "/repos/x/issues/"), ("POST", "/repos/x/Issues"),
        ("post", "/REPOS/x/ISSUES/"), ("POST", "/repos/x/issue%73"), ("POST", "/repos/x/%49ssues"),
    ])
    func confirmRulesMatchEveryReadingOfThePath(method: String, path: String) throws {
        let settings = MCPSettings(
            allow: [try Self.rule("* /repos/**")], confirm: [try Self.rule("POST /repos/*/issues")])
        #expect(
            settings.decide(method: method, path: try Self.path(path))
                == .confirm(try Self.rule("POST /repos/*/issues")), "\(method) \(path)")
    }

    /// Escapes of reserved characters are decoded for deny and confirm (a server decodes
    /// `%3A` before routing), and a `GET` rule covers `HEAD` (answered by the `GET` handler).
    @Test func denyCoversDecodedEscapesAndHeadForGet() throws {
        let settings = MCPSettings(
            allow: [try Self.rule("* /**")],
            deny: [try Self.rule("POST /v1/projects/p:delete"), try Self.rule("GET /admin/**")])
        #expect(
            settings.decide(method: "POST", path: try Self.path("/v1/projects/p%3Adelete"))
                == .denied(try Self.rule("POST /v1/projects/p:delete")))
        #expect(
            settings.decide(method: "POST", path: try Self.path("/v1/projects/P%3aDelete"))
                == .denied(try Self.rule("POST /v1/projects/p:delete")))
        #expect(
            settings.decide(method: "HEAD", path: try Self.path("/admin/x")) == .denied(try Self.rule("GET /admin/**")))
        #expect(settings.decide(method: "POST", path: try Self.path("/admin/x")) == .allowed(try Self.rule("* /**")))
    }

    /// `allow` matches the path exactly as it is sent: another case or a trailing slash is not
    /// what the rule names.
    @Test(arguments: [("GET /repos/*", "/Repos/a"), ("GET /repos/*", "/repos/a/"), ("GET /a:b", "/a%3Ab")])
    func allowRulesMatchOnlyThePathAsSent(rule: String, path: String) throws {
        let settings = MCPSettings(allow: [try Self.rule(rule)])
        #expect(settings.decide(method: "GET", path: try Self.path(path)) == .unlisted, "\(rule) vs \(path)")
    }

    @Test func refusedPathsSayWhy() {
        func reason(_ path: String) -> String {
            guard case .failure(let error) = MCPPath.normalise(path) else { return "accepted" }
            return error.description
        }
        #expect(reason("/admin;x/secret").contains("';'"))
        #expect(reason("/admin;x/secret").contains("Tomcat"))
        #expect(reason("/a/%3bx").contains("';'"))
        #expect(reason("/repos/x//issues").contains("empty segment"))
        #expect(reason("/a/").hasPrefix("accepted"))
        #expect(reason("/").hasPrefix("accepted"))
    }

    @Test(arguments: [
        ("GET /a;x/b", "';'"), ("GET /a//b", "empty segment"), ("GET /a%3Bb", "';'"), ("GET /a/../b", "'..'"),
    ])
    func rulesNoPathCanMatchAreReported(text: String, reason: String) throws {
        let found = try #require(try Self.rule(text).neverMatchesReason, "\(text)")
        #expect(found.contains(reason), "\(text): \(found)")
        #expect(try Self.rule("GET /a/b/").neverMatchesReason == nil)
    }

    @Test(arguments: ["GET", "GET /a /b", "G@T /a", "GET repos", "GET /v1/item*"])
    func malformedRulesDoNotParse(text: String) {
        if case .success = MCPRule.parse(text) { Issue.record("\(text) parsed") }
    }

    @Test func decoderReadsEnvironmentAndProfileBlocks() async throws {
        let result = await decodeConfig(
            """
            version: 1
            environments:
              e:
                base_url: https://api.example.com
                mcp:
                  allow: ["GET /repos/**"]
                  deny: ["* /repos/*/admin/**"]
                  confirm: ["POST /repos/*/issues"]
                  max_response_bytes: 64KiB
                profiles:
                  p:
                    type: bearer
                    token: { env: T }
                    mcp: { allow: ["GET /me"] }
            """, environment: ["HOME": "/home/u", "T": "token-value"])
        let settings = try #require(result.settings, "\(result.diagnostics.map(\.rendered))")
        #expect(!result.hasErrors)
        let environment = try #require(settings.environment(named: "e"))
        #expect(environment.mcp?.allow.map(\.text) == ["GET /repos/**"])
        #expect(environment.mcp?.deny.map(\.text) == ["* /repos/*/admin/**"])
        #expect(environment.mcp?.confirm.map(\.text) == ["POST /repos/*/issues"])
        #expect(environment.mcp?.maxResponseBytes == 64 * 1024)
        #expect(environment.profile(named: "p")?.mcp?.allow.map(\.text) == ["GET /me"])
    }

    @Test func diagnosticsPointAtTheRule() async {
        let result = await decodeConfig(
            environmentConfig(
                """
                mcp:
                  allow:
                    - "GET /ok"
                    - "GET nope"
                    - "* /**"
                    - "GET /a/../b"
                  bogus: 1
                """), mode: .check(resolveSecrets: false))
        func find(_ fragment: String) -> ConfigDiagnostic? {
            result.diagnostics.first { $0.message.contains(fragment) }
        }
        let unparsable = find("must start with '/'")
        #expect(unparsable?.severity == .error)
        #expect(unparsable?.line == 8)
        #expect(unparsable?.rendered.hasPrefix("\(testConfigPath):8:") == true)
        let everything = find("any method")
        #expect(everything?.severity == .warning)
        #expect(everything?.line == 9)
        let never = find("can never match")
        #expect(never?.severity == .warning)
        #expect(never?.line == 10)
        #expect(find("unknown key 'bogus'")?.severity == .error)
    }

    @Test func editingRulesIsAnMCPChangeThatKeepsSessions() async throws {
        let before = """
            version: 1
            environments:
              e:
                base_url: https://api.example.com
                mcp: { allow: ["GET /a"] }
                profiles:
                  p: { type: bearer, token: { env: T } }
            """
        let after = before.replacingOccurrences(of: "GET /a", with: "GET /b")
        let environment = ["HOME": "/home/u", "T": "token-value"]
        let old = try #require(await decodeConfig(before, environment: environment).settings)
        let new = try #require(await decodeConfig(after, environment: environment).settings)
        let diff = SettingsDiff(old: old, new: new)
        #expect(diff.mcpChanged)
        #expect(diff.changed.isEmpty && diff.added.isEmpty && diff.removed.isEmpty)
        #expect(diff.keeps(environment: "e", profile: "p"))
        #expect(!SettingsDiff(old: old, new: old).mcpChanged)
    }
}
