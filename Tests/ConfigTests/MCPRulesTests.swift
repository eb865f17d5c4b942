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

    @Test(arguments: ["/repos/a/SECRET/x", "/repos/a/secret/", "/repos//a/secret/x", "/Repos/a/Secret"])
    func denyRulesCannotBeWalkedAroundByCaseOrEmptySegments(path: String) throws {
        let settings = MCPSettings(
            allow: [try Self.rule("GET /**")], deny: [try Self.rule("* /repos/*/secret/**")])
        #expect(
            settings.decide(method: "GET", path: try Self.path(path)) == .denied(try Self.rule("* /repos/*/secret/**")))
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
