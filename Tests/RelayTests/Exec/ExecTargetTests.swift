import Testing
import TokenRelayConfig

@testable import TokenRelayServer

/// Where a request to `tokenrelay exec`'s endpoint goes: `/ENV/...` under that environment's
/// `base_url`, the path normalised by the rules' normaliser, anything it refuses refused.
@Suite struct ExecTargetTests {
    static let served: Set<String> = ["github", "openai"]

    @Test(arguments: [
        ("/github/repos/a/b?state=open&x=%2F", "github", "/repos/a/b", "state=open&x=%2F"),
        ("/github", "github", "/", nil),
        ("/github/", "github", "/", nil),
        ("/openai/v1/chat/completions", "openai", "/v1/chat/completions", nil),
        ("/%67ithub/%7Euser?", "github", "/~user", ""),
        ("/github/repos/", "github", "/repos/", nil),
    ])
    func aPathUnderAnEnvironmentResolves(target: String, environment: String, path: String, query: String?) throws {
        let resolved = try ExecTarget.resolve(target, served: Self.served).get()
        #expect(resolved.environment == environment)
        #expect(resolved.path.description == path)
        #expect(resolved.query == query)
    }

    @Test(arguments: [
        "/github/../openai/x", "/github/a/%2e%2E/b", "/github/a%2Fb", "/github/a%2fb", "/github/a/%5Cb",
        "/github//x", "/github/a;x/b", "/github/a%3Bx", "/github/a%252Fb", "/github/a#f", "/github/a?b#f",
        "/../github/x", "/github/./x", "/github/%zz",
    ])
    func dotSegmentsAndEncodedSlashesAreRefused(target: String) {
        guard case .failure(let refusal) = ExecTarget.resolve(target, served: Self.served) else {
            Issue.record("\(target) was accepted")
            return
        }
        #expect(!refusal.unknownEnvironment)
    }

    @Test(arguments: ["/", "/gitlab/x", "/GITHUB/x", "//x"])
    func anEnvironmentThatIsNotServedIsNotFound(target: String) {
        guard case .failure(let refusal) = ExecTarget.resolve(target, served: Self.served) else {
            Issue.record("\(target) was accepted")
            return
        }
        #expect(refusal.unknownEnvironment || target == "//x")
    }
}
