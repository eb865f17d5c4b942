import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// The real binary over pipes: framing, errors, cancellation, load, lifecycle.
@Suite(.serialized) struct ServeEndToEndTests {
    @Test func ndjsonRoundTripKeepsNonASCIIAndTwentyDigitIntegers() async throws {
        let relay = try RelayProcess()
        try relay.send(
            #"{"jsonrpc":"2.0","id":12345678901234567890,"method":"test/wait","params":{"ms":0,"echo":{"text":"héllo 日本 ✓","n":98765432109876543210,"f":1.25e-7}}}"#
        )
        let lines = try await relay.lines(atLeast: 1)
        #expect(
            lines[0].jsonText
                == #"{"jsonrpc":"2.0","id":12345678901234567890,"result":{"echo":{"text":"héllo 日本 ✓","n":98765432109876543210,"f":1.25e-7}}}"#
        )
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    /// What a started server has mapped once it answered its first `ping`: FoundationEssentials
    /// (what every module imports), never Foundation or ICU (tokenrelay does not import them: they
    /// were 2.5 ms of each start), nor libcurl, libcrypto, libsqlite3, libpq or libsecret (loaded
    /// on first use).
    @Test func aStartedServerHasMappedNeitherFoundationNorICUNorTheLibrariesLoadedOnFirstUse() async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)
        let maps = try String(contentsOfFile: "/proc/\(relay.pid)/maps", encoding: .utf8)
        let files = Set(maps.split(separator: "\n").compactMap { $0.split(separator: "/").last.map(String.init) })
        #expect(files.contains { $0.hasPrefix("libFoundationEssentials.so") })
        for library in [
            "libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so", "libicu",
            "libFoundationNetworking.so", "libcurl.so", "libcrypto.so", "libssl.so", "libsqlite3.so",
            // The secret service's store key: only a process that opens the store (issue 50).
            "libsecret-1.so", "libglib-2.0.so", "libgio-2.0.so", "libpq.so",
        ] {
            #expect(!files.contains { $0.hasPrefix(library) }, "\(library) is mapped at start")
        }
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    @Test func lspRoundTripCountsUTF8BytesAndRepliesInLSPFraming() async throws {
        let relay = try RelayProcess()
        let body = #"{"jsonrpc":"2.0","id":"é","method":"test/wait","params":{"ms":0,"echo":"ünï ✓"}}"#
        try relay.write("Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        let expected = #"{"jsonrpc":"2.0","id":"é","result":{"echo":"ünï ✓"}}"#
        #expect(relay.stdoutText == "Content-Length: \(expected.utf8.count)\r\n\r\n\(expected)")
    }

    @Test func malformedLineThenValidRequestBothAnswered() async throws {
        let relay = try RelayProcess()
        try relay.write("this is not json\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
        let lines = try await relay.lines(atLeast: 2)
        #expect(lines[0]["id"] == .null)
        #expect(lines[0]["error"]?["code"] == .int(-32700))
        #expect(lines[1]["id"] == 2)
        #expect(lines[1]["result"] == .object([:]))
    }

    @Test func unknownMethodAndInvalidRequestAreErrorsAndTheStreamGoesOn() async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":2,"params":{}}"#)
        try relay.send(#"{"jsonrpc":"2.0","method":"no/such/notification"}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        let lines = try await relay.lines(atLeast: 3)
        #expect(lines[0]["error"]?["code"] == .int(-32601))
        #expect(lines[1]["error"]?["code"] == .int(-32600))
        #expect(lines[1]["id"] == 2)
        #expect(lines[2]["id"] == 3)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        #expect(relay.stdoutText.split(separator: "\n").count == 3)
    }

    @Test func cancellingALongRequestAnswersItWithRequestCancelled() async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":"long","method":"test/wait","params":{"ms":600000}}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)  // the ping proves the long request is in flight
        try relay.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"long"}}"#)
        let lines = try await relay.lines(atLeast: 2)
        #expect(lines[1]["id"] == "long")
        #expect(lines[1]["error"]?["code"] == .int(-32800))
    }

    @Test func endOfInputWithARequestThatNeverEndsAnswersItShuttingDownAfterTheGraceAndExitsZero() async throws {
        // The grace is 200 ms here (10 s by default); the request alone would run for an hour.
        let relay = try RelayProcess(environment: ["TOKENRELAY_TEST_GRACE_MS": "200"])
        try relay.send(#"{"jsonrpc":"2.0","id":"forever","method":"test/wait","params":{"ms":3600000}}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)  // the ping proves the long request is in flight
        try relay.closeStdin()
        #expect(try await relay.exitCode(timeout: .seconds(60)) == 0)
        let lines = try await relay.lines(atLeast: 2)
        let forever = try #require(lines.first { $0["id"] == "forever" })
        #expect(forever["error"]?["data"]?["kind"] == "shutting_down", "\(forever.jsonText)")
    }

    @Test func exitThenEndOfInputInOneWriteExitsOneWithoutShutdownEveryTime() async throws {
        var codes: [Int32] = []
        for _ in 0..<6 {
            try await withThrowingTaskGroup(of: Int32.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let relay = try RelayProcess()
                        try relay.write(#"{"jsonrpc":"2.0","method":"exit"}"# + "\n")
                        try relay.closeStdin()
                        return try await relay.exitCode()
                    }
                }
                for try await code in group { codes.append(code) }
            }
        }
        #expect(codes.count == 48)
        #expect(codes.allSatisfy { $0 == 1 }, "exit codes: \(codes)")
    }

    @Test func threeHundredPipelinedRequestsAreAllAnsweredWithMatchingIDs() async throws {
        let relay = try RelayProcess()
        var text = ""
        for id in 0..<300 {
            text +=
                #"{"jsonrpc":"2.0","id":\#(id),"method":"test/wait","params":{"ms":\#(id % 7),"echo":\#(id)}}"# + "\n"
        }
        try relay.write(text)
        let lines = try await relay.lines(atLeast: 300)
        #expect(lines.count == 300)
        for line in lines {
            #expect(line["id"] == line["result"]?["echo"])
        }
        #expect(Set(lines.compactMap { $0["id"]?.numberValue?.intValue }) == Set(0..<300))
    }

    @Test func exitAfterShutdownIsZeroAndWithoutShutdownIsOne() async throws {
        let clean = try RelayProcess()
        try clean.send(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#)
        _ = try await clean.lines(atLeast: 1)
        try clean.send(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        let lines = try await clean.lines(atLeast: 2)
        #expect(lines[1]["error"]?["data"]?["kind"] == "shutting_down")
        try clean.send(#"{"jsonrpc":"2.0","method":"exit"}"#)
        #expect(try await clean.exitCode() == 0)

        let abrupt = try RelayProcess()
        try abrupt.send(#"{"jsonrpc":"2.0","method":"exit"}"#)
        #expect(try await abrupt.exitCode() == 1)
    }

    @Test func endOfInputDrainsInFlightRequestsAndExitsZero() async throws {
        let relay = try RelayProcess()
        try relay.write(
            #"{"jsonrpc":"2.0","id":1,"method":"test/wait","params":{"ms":300}}"# + "\n"
                + #"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        let lines = try await relay.lines(atLeast: 2)
        #expect(Set(lines.compactMap { $0["id"]?.numberValue?.intValue }) == [1, 2])
    }

    @Test func sigtermFromAThreadThatBlocksItStillDrainsAndExitsZero() async throws {
        // This test runs off the main thread, so the child inherits a mask blocking SIGTERM;
        // tokenrelay unblocks it at start.
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"test/wait","params":{"ms":200}}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)
        relay.signal(SIGTERM)
        #expect(try await relay.exitCode() == 0)
        let lines = try await relay.lines(atLeast: 2)
        #expect(lines.contains { $0["id"] == 1 && $0["result"] != nil })
    }

    @Test func stdoutCarriesOnlyFramesAtTraceLevel() async throws {
        let relay = try RelayProcess(["--log-level", "trace"])
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":\#(getpid())}}"#)
        try relay.send("garbage")
        try relay.send(#"{"jsonrpc":"2.0","id":2,"method":"rpc.discover"}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#)
        try relay.send(#"{"jsonrpc":"2.0","method":"exit"}"#)
        #expect(try await relay.exitCode() == 0)
        for line in relay.stdoutText.split(separator: "\n") {
            let value = try JSONParser.parse(String(line))
            #expect(value["jsonrpc"] == "2.0", "only JSON-RPC frames on stdout: \(line.prefix(80))")
        }
        #expect(relay.stdoutText.split(separator: "\n").count == 4)
        #expect(!relay.stderrText.isEmpty, "trace logging goes to stderr")
    }

    @Test func twentyThousandRequestsWrittenBeforeReadingAreAllAnsweredWithLimitErrorsOnlyPastTheQueue() async throws {
        let relay = try RelayProcess()
        let total = 20_000
        let executing = 256
        let queued = 10_000
        var text = ""
        text.reserveCapacity(total * 80)
        for id in 0..<total {
            text += #"{"jsonrpc":"2.0","id":\#(id),"method":"test/wait","params":{"ms":3600000}}"# + "\n"
        }
        // Write everything before reading anything (the drain threads buffer the output).
        try relay.write(text)
        let rejected = try await relay.lines(atLeast: total - executing - queued)
        #expect(rejected.allSatisfy { $0["error"]?["data"]?["kind"] == "limit" })
        #expect(rejected.compactMap { $0["id"]?.numberValue?.intValue }.allSatisfy { $0 >= executing + queued })
        var cancels = ""
        for id in 0..<(executing + queued) {
            cancels += #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":\#(id)}}"# + "\n"
        }
        try relay.write(cancels)
        let all = try await relay.lines(atLeast: total, timeout: .seconds(120))
        #expect(all.count == total)
        #expect(Set(all.compactMap { $0["id"]?.numberValue?.intValue }).count == total)
        #expect(all.filter { $0["error"]?["data"]?["kind"] == "limit" }.count == total - executing - queued)
        #expect(all.filter { $0["error"]?["code"] == .int(-32800) }.count == executing + queued)
    }

    @Test func closedStdoutMeansThePeerIsGoneAndTheProcessExitsCleanly() async throws {
        let relay = try RelayProcess()
        await relay.closeStdout()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        #expect(try await relay.exitCode() == 0)
    }

    @Test func versionHelpAndUsageErrors() async throws {
        let version = try RelayProcess(["--version"])
        #expect(try await version.exitCode() == 0)
        #expect(version.stdoutText.hasPrefix("tokenrelay "))
        let help = try RelayProcess(["--help"])
        #expect(try await help.exitCode() == 0)
        #expect(help.stdoutText.contains("Usage:"))
        let bad = try RelayProcess(["--frobnicate"])
        #expect(try await bad.exitCode() == 2)
        #expect(bad.stderrText.contains("unknown option"))
    }
}

/// `initialize {processId}`: tokenrelay stops when that process dies.
@Suite struct ParentWatchdogTests {
    @Test func theProcessExitsCleanlyWhenTheParentNamedInInitializeDies() async throws {
        let parent = try ChildProcess(
            "/bin/sleep", ["600"], environment: ProcessInfo.processInfo.environment, stdout: .null, stderr: .null)
        defer { parent.signal(SIGKILL) }
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":\#(parent.pid)}}"#)
        let lines = try await relay.lines(atLeast: 1)
        #expect(lines[0]["result"]?["serverInfo"]?["name"] == "tokenrelay")
        parent.signal(SIGKILL)
        // Reaped: no zombie left for the watchdog to see as alive.
        #expect(await parent.wait() == .signalled(SIGKILL))
        // stdin stays open: only the watchdog can stop the server.
        #expect(try await relay.exitCode() == 0)
    }
}

/// Methods without params refuse unknown ones like every other method.
@Suite struct NoParamMethodsTests {
    @Test(arguments: ["ping", "status", "rpc.discover", "shutdown"])
    func unknownParamsAreInvalid(method: String) async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"\#(method)","params":{"bogus":1}}"#)
        let lines = try await relay.lines(atLeast: 1)
        #expect(lines[0]["error"]?["code"] == .int(-32602))
        #expect(lines[0]["error"]?["data"]?["diagnostics"] == [["pointer": "/bogus", "reason": "unknown member"]])
    }
}
