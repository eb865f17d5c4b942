import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Issue 34 through the real binary, finding 5: a `serve` renewing a rotating refresh token while
/// `store rekey` re-seals the store under a new key.
@Suite struct StoreFaultEndToEndTests {
    static let keyA = "m6fQu6bZUqFVAZayOBuvhaoOxZkAsq8VypZ366VB/pE="
    static let keyB = "ttnaHWm5jWziNsvVLLUkmkrCbB7NckOOIZOAPHJtzkQ="
    static let tokenGet = #"{"jsonrpc":"2.0","id":1,"method":"token-get","params":{}}"#

    /// Finding 5: `store rekey` to key B completes while `serve` (key A) waits for the token
    /// endpoint; serve's commit then writes nothing sealed under A and says the store was
    /// re-keyed, so a process with key B opens every record.
    @Test func aCommitAfterARekeyElsewhereWritesNothingUnderTheOldKey() async throws {
        let server = try await RotatingTokenServer(holdRefresh: 2, sealed: true)
        let keyA = ["ROTATING_STORE_KEY": Self.keyA]
        let keyB = ["ROTATING_STORE_KEY": Self.keyB]
        // A session committed under key A (the seed's refresh: at-1, due at once, and rt-1).
        let seeded = try await server.run(["token"], environment: keyA)
        #expect(seeded.code == 0, "\(seeded.stderr)")

        let serve = try server.start(["serve", "--log-level", "info"], environment: keyA, closingStdin: false)
        try serve.send(Self.tokenGet)
        try await server.awaitHeldRefresh()
        let rekey = try await server.run(
            ["store", "rekey", "--new-key-env", "ROTATING_NEW_KEY"],
            environment: keyA.merging(["ROTATING_NEW_KEY": Self.keyB]) { $1 })
        #expect(rekey.code == 0, "\(rekey.stdout) \(rekey.stderr)")
        try await server.release()

        _ = try await serve.lines(atLeast: 1)
        try await serve.waitForStderr("was re-keyed")
        try serve.closeStdin()
        _ = try await serve.exitCode()
        #expect(!serve.stderrText.contains("tampered"), "\(serve.stderrText)")

        let status = try await server.run(["status"], environment: keyB)
        #expect(status.code == 0, "\(status.stdout) \(status.stderr)")
        #expect(status.stdout.contains("seeded"), "\(status.stdout)")
        #expect(!(status.stdout + status.stderr).contains("tampered"), "\(status.stdout) \(status.stderr)")
        #expect(!(status.stdout + status.stderr).contains("does not open"), "\(status.stdout) \(status.stderr)")
    }
}
