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

    /// Finding 5, and issue 44: `store rekey` to key B while `serve` (key A) renews at the token
    /// endpoint waits for that renewal (SPEC §5.6: it takes every session's renewal lease), so the
    /// rotated refresh token is committed under A and re-sealed under B with the rest: serve's
    /// caller gets its token, and a process with key B renews with the rotated token (a spent
    /// one would be refused), nothing presented twice.
    @Test func aRekeyWaitsForARenewalUnderWayAndReSealsItsRotatedToken() async throws {
        let server = try await RotatingTokenServer(holdRefresh: 2, sealed: true)
        let keyA = ["ROTATING_STORE_KEY": Self.keyA]
        let keyB = ["ROTATING_STORE_KEY": Self.keyB]
        // A session committed under key A (the seed's refresh: at-1, due at once, and rt-1).
        let seeded = try await server.run(["token"], environment: keyA)
        #expect(seeded.code == 0, "\(seeded.stderr)")

        let serve = try server.start(["serve", "--log-level", "info"], environment: keyA, closingStdin: false)
        try serve.send(Self.tokenGet)
        try await server.awaitHeldRefresh()
        let rekey = try server.start(
            ["store", "rekey", "--new-key-env", "ROTATING_NEW_KEY"],
            environment: keyA.merging(["ROTATING_NEW_KEY": Self.keyB]) { $1 })
        try await rekey.waitForStderr("waiting for the renewal of api/seeded")
        // It holds no lease of the session it waits for, so it cannot have re-sealed anything.
        #expect(!rekey.hasExited, "\(rekey.stderrText)")
        try await server.release()

        let answer = try #require(try await serve.lines(atLeast: 1).first)
        #expect(answer["result"]?["access_token"] == "at-2", "\(answer)")
        #expect(try await rekey.exitCode() == 0, "\(rekey.stderrText)")
        try serve.closeStdin()
        #expect(try await serve.exitCode() == 0, "\(serve.stderrText)")

        let next = try await server.run(["token", "--min-valid", "60s"], environment: keyB)
        #expect(next.code == 0, "\(next.stderr)")
        #expect(next.stdout == "at-3\n")
        let stats = try await server.stats()
        #expect(stats.reuses == 0)
        #expect(stats.refreshes == [RotatingTokenServer.seed, "rt-1", "rt-2"])
    }

    /// A process that finds the store re-keyed before it commits a rotation (its renewal outlived
    /// its lease, so the rekey did not wait for it) keeps the rotated refresh token in memory and
    /// says so; no message claims the store's sessions are intact.
    @Test func aRotationThatCannotBeCommittedAfterARekeyIsSaidToLiveInMemoryOnly() async throws {
        let server = try await RotatingTokenServer(holdRefresh: 2, sealed: true)
        let keyA = ["ROTATING_STORE_KEY": Self.keyA]
        let seeded = try await server.run(["token"], environment: keyA)
        #expect(seeded.code == 0, "\(seeded.stderr)")

        let serve = try server.start(["serve", "--log-level", "info"], environment: keyA, closingStdin: false)
        try serve.send(Self.tokenGet)
        try await server.awaitHeldRefresh()
        // The renewal's lease row is gone (as when it lapsed): the rekey does not wait.
        let holder = try await Self.sqlite(server.database, "DELETE FROM leases")
        #expect(holder.isEmpty)
        let rekey = try await server.run(
            ["store", "rekey", "--new-key-env", "ROTATING_NEW_KEY"],
            environment: keyA.merging(["ROTATING_NEW_KEY": Self.keyB]) { $1 })
        #expect(rekey.code == 0, "\(rekey.stdout) \(rekey.stderr)")
        try await server.release()

        let answer = try #require(try await serve.lines(atLeast: 1).first)
        let message = answer["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("was re-keyed"), "\(answer)")
        #expect(message.contains("kept in this process's memory only"), "\(answer)")
        #expect(!message.contains("intact"), "\(answer)")
        try serve.closeStdin()
        _ = try await serve.exitCode()
        #expect(!serve.stderrText.contains("intact"), "\(serve.stderrText)")
        #expect(!serve.stderrText.contains("rt-2"), "a refresh token on stderr")
    }

    /// Runs one SQL statement on `database` with python3's sqlite3; what it prints.
    static func sqlite(_ database: String, _ statement: String) async throws -> String {
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            for row in c.execute(sys.argv[2]): print(row)
            """
        let process = try RelayProcess(launcher: ["/usr/bin/python3", "-c", script, database, statement])
        try process.closeStdin()
        #expect(try await process.exitCode() == 0, "\(process.stderrText)")
        return process.stdoutText
    }
}
