import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// A one-shot command signalled while its refresh request is at the token endpoint finishes the
/// renewal and commits the rotated refresh token before it exits (SPEC §5.2: a renewal that was
/// sent runs to completion and is committed), so the next process refreshes with the new token
/// instead of replaying the spent one (issue 34, finding 2). The endpoint refuses any replay.
@Suite struct InterruptedRenewalTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let arguments: [String]
        let signal: Int32
        var testDescription: String { "\(arguments[0]) signalled \(signal)" }
    }

    static let cases = [
        Case(arguments: ["call", "GET", "/data"], signal: SIGINT),
        Case(arguments: ["token"], signal: SIGTERM),
        Case(arguments: ["call", "GET", "/data"], signal: SIGHUP),
    ]

    @Test(arguments: cases)
    func aSignalDuringARefreshCommitsTheRotatedRefreshToken(_ interrupted: Case) async throws {
        let server = try await RotatingTokenServer(holdFirstRefresh: true)
        let first = try server.start(interrupted.arguments + ["--log-level", "info"])
        try await server.awaitHeldRefresh()
        first.signal(interrupted.signal)
        // The command says it finishes the renewal already sent rather than dying with it.
        try await first.waitForStderr("already sent")
        try await server.release()
        // It still ends by the signal (as curl does), once the rotated token is committed.
        #expect(try await first.exitCode() == interrupted.signal, "\(first.stderrText)")

        try await server.expectTheNextProcessRefreshesWithTheRotatedToken()
    }
}
