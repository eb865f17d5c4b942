import Foundation
import Testing
import TokenRelayErrorKinds

@testable import TokenRelayServer

@Suite struct ExitCodesTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func everyKindHasExactlyOneRow() {
        let kinds = ExitCodes.table.map(\.kind)
        #expect(kinds == ErrorKind.allCases)
    }

    @Test func readmesTableOfFailuresIsTheCodesTable() throws {
        let readme = try String(
            contentsOf: Self.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(
            readme.contains(ExitCodes.failureTableMarkdown),
            "README's exit-code table is stale; paste:\n\(ExitCodes.failureTableMarkdown)")
    }

    @Test func theDocumentedCodesOfEachCommandHold() {
        // README's prose: call 7 transport/timeout/limit, 8 auth/interaction_required, 3 config, 2 usage.
        #expect(ExitCodes.code(for: .transport, in: .call) == 7)
        #expect(ExitCodes.code(for: .limit, in: .call) == 7)
        #expect(ExitCodes.code(for: .interactionRequired, in: .call) == 8)
        #expect(ExitCodes.code(for: .unknownProfile, in: .call) == 3)
        #expect(ExitCodes.code(for: .invalidParams, in: .call) == 2)
        // login: 8 for every failure of the login itself, 3 for a profile that does not log in.
        #expect(ExitCodes.code(for: .timeout, in: .login) == 8)
        #expect(ExitCodes.code(for: .notSupported, in: .login) == 3)
        // token: 9 interaction_required, 8 auth, 7 transport, 3 not_supported.
        #expect(ExitCodes.code(for: .interactionRequired, in: .token) == 9)
        #expect(ExitCodes.code(for: .auth, in: .token) == 8)
        #expect(ExitCodes.code(for: .timeout, in: .token) == 7)
        #expect(ExitCodes.code(for: .notSupported, in: .token) == 3)
        // status, logout, store: 3 config, 2 usage, 1 otherwise.
        #expect(ExitCodes.code(for: .auth, in: .sessions) == 1)
        #expect(ExitCodes.code(for: .config, in: .sessions) == 3)
    }
}
