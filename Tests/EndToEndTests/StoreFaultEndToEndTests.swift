import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// Issue 34 through the real binary, findings 3 and 5: a `serve` renewing a rotating refresh token
/// while another program holds the store's write lock past the busy timeout, or while `store
/// rekey` re-seals the store under a new key. The token endpoint refuses a spent refresh token, so
/// a rotated one that is lost shows as a replay.
@Suite struct StoreFaultEndToEndTests {
    static let keyA = "m6fQu6bZUqFVAZayOBuvhaoOxZkAsq8VypZ366VB/pE="
    static let keyB = "ttnaHWm5jWziNsvVLLUkmkrCbB7NckOOIZOAPHJtzkQ="
    static let tokenGet = #"{"jsonrpc":"2.0","id":1,"method":"token-get","params":{}}"#

    /// Another program holding the store's write lock: python3's `sqlite3` in `BEGIN EXCLUSIVE`
    /// (the store is in WAL mode: readers go on, writers wait), printing "locked" once it holds
    /// it and committing at the first line on its stdin. Run through ``RelayProcess``'s launcher
    /// for its pipes and waits (the binary's path it appends is an argument the script ignores).
    static func holdWriteLock(_ database: String) async throws -> RelayProcess {
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            sys.stdin.readline()
            c.execute("COMMIT")
            """
        let holder = try RelayProcess(launcher: ["/usr/bin/python3", "-c", script, database])
        try await holder.waitForStdout("the write lock") { String(decoding: $0, as: UTF8.self).contains("locked\n") }
        return holder
    }

    /// Finding 3: the renewal's commit fails (the write lock is held past the busy timeout); it is
    /// logged as an error without the token, the caller gets an answer of kind `store`, and the
    /// rotated refresh token, kept in memory, is committed at stdin EOF once the lock is free: the
    /// next process refreshes with it (a replay of the spent one would be refused).
    @Test func aRotatedRefreshTokenWhoseCommitFailedIsCommittedAtClose() async throws {
        let server = try await RotatingTokenServer(holdFirstRefresh: true)
        let serve = try server.start(["serve", "--log-level", "info"], closingStdin: false)
        try serve.send(Self.tokenGet)
        // The renewal holds its lease and is at the token endpoint: now the lock is taken.
        try await server.awaitHeldRefresh()
        let holder = try await Self.holdWriteLock(server.database)
        try await server.release()

        let answer = try #require(try await serve.lines(atLeast: 1).first)
        #expect(answer["id"] == 1)
        #expect(answer["error"]?["data"]?["kind"] == "store", "\(answer)")
        let failed = try await serve.stderrLine(containing: "could not be committed to the store")
        #expect(failed.lowercased().contains("error"), "\(failed)")

        try holder.write("commit\n")
        #expect(try await holder.exitCode() == 0, "\(holder.stderrText)")
        try serve.closeStdin()
        #expect(try await serve.exitCode() == 0, "\(serve.stderrText)")
        #expect(serve.stderrText.contains("is committed to the store now"), "\(serve.stderrText)")
        for secret in [RotatingTokenServer.seed, "rt-1", "at-1", RotatingTokenServer.clientSecret] {
            #expect(!serve.stderrText.contains(secret), "\(secret) on stderr")
        }

        try await server.expectTheNextProcessRefreshesWithTheRotatedToken()
    }

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
