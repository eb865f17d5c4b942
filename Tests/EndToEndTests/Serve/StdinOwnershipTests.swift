import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// Who reads stdin (`StdioReader`): a thread of its own until a transfer loop runs, then that
/// loop, which polls it between transfers and gives it back when it stops. Each hand-over is a
/// debug log line the tests wait on; whoever reads, every message is answered and the end of
/// input ends the server.
@Suite struct StdinOwnershipTests {
    static let takenByTheLoop = "stdin: read by a transfer loop from now on"
    static let givenBack = "stdin: read by a thread of its own again"

    static func config(_ server: RecordingServer, environment: String = "rec") -> String {
        """
        version: 1
        store: { type: memory }
        default_environment: \(environment)
        environments:
          \(environment):
            base_url: \(server.origin)
        """
    }

    /// A request (which starts the transfer loop), then a ping: the thread hands stdin over
    /// after reading it.
    static func handOverToTheLoop(_ relay: RelayProcess, occurrence: Int = 1) async throws {
        let first = try await relay.call("request", ["path": "/echo"])
        #expect(first["result"]?["status"] == 200, "\(first.jsonText)")
        #expect(try await relay.call("ping")["result"] != nil)
        try await relay.waitForStderr(takenByTheLoop, occurrences: occurrence)
    }

    /// A relay logging at debug whose stdin is read by its thread (no config: no transfer loop
    /// ever), or by the loop of its first request, which took stdin over (`server` answered that
    /// request: keep it as long as the relay).
    static func relay(readByTheLoop: Bool, nonBlockingStdin: Bool = false) async throws -> (
        relay: RelayProcess, server: RecordingServer?
    ) {
        guard readByTheLoop else {
            return (try RelayProcess(["--log-level", "debug"], nonBlockingStdin: nonBlockingStdin), nil)
        }
        let server = try await RecordingServer()
        let path = try TemporaryDirectory.file(config(server))
        let relay = try RelayProcess(["--config", path, "--log-level", "debug"], nonBlockingStdin: nonBlockingStdin)
        try await handOverToTheLoop(relay)
        return (relay, server)
    }

    @Test func theLoopAnswersPipelinedRequestsInFullAndTheEndOfThePipeEndsTheServer() async throws {
        let server = try await RecordingServer()
        let path = try TemporaryDirectory.file(Self.config(server))
        let relay = try RelayProcess(["--config", path, "--log-level", "debug"])
        try await Self.handOverToTheLoop(relay)

        // Written at once and then closed: the loop reads them all and sees the pipe's end.
        var text = ""
        for id in 0..<50 {
            text +=
                #"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/echo","query":{"n":\#(id)}}}"#
                + "\n"
        }
        try relay.write(text)
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
        let answers = relay.parsedLines.compactMap { line -> Int? in
            guard line["result"]?["status"] == 200 else { return nil }
            return line["id"]?.numberValue?.intValue
        }
        #expect(Set(answers) == Set(0..<50), "every pipelined request answered")
        #expect(!relay.stderrText.contains(Self.givenBack), "the loop kept stdin to its end")
    }

    @Test func aReloadThatDropsTheLoopGivesStdinBackAndTheNextLoopTakesIt() async throws {
        let server = try await RecordingServer()
        let file = try ReloadEndToEndTests.ConfigFile(Self.config(server))
        let relay = try RelayProcess(["--config", file.path, "--log-level", "debug"])
        try await Self.handOverToTheLoop(relay)

        // The environment is renamed: its transport (and loop) is dropped after the reload.
        try file.write(Self.config(server, environment: "renamed"))
        relay.signal(SIGHUP)
        try await relay.waitForStderr("reload: dropped")
        try await relay.waitForStderr(Self.givenBack)
        #expect(try await relay.call("ping")["result"] != nil, "read by its own thread again")

        try await Self.handOverToTheLoop(relay, occurrence: 2)
        let last = try await relay.call("request", ["path": "/echo", "query": ["n": "last"]])
        #expect(last["result"]?["status"] == 200, "\(last.jsonText)")
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    /// A read of a non-blocking stdin with nothing in it answers EAGAIN: the reader waits for
    /// more (it used to take that for the end of input). After each answer the reader has
    /// already gone back to an empty stdin, so every ping after the first meets that case; read
    /// by the loop, the loop polls again.
    @Test(arguments: [false, true])
    func aNonBlockingStdinIsWaitedOnNotTakenForItsEnd(readByTheLoop: Bool) async throws {
        let (relay, server) = try await Self.relay(readByTheLoop: readByTheLoop, nonBlockingStdin: true)
        defer { withExtendedLifetime(server) {} }
        for _ in 0..<3 {
            #expect(try await relay.call("ping", timeout: .seconds(60))["result"] != nil)
        }
        #expect(!relay.stderrText.contains("stdin read failed"))
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    @Test func stdinFromARegularFileIsAnsweredInFullAndItsEndEndsTheServer() async throws {
        let server = try await RecordingServer()
        let config = try TemporaryDirectory.file(Self.config(server))
        let directory = try TemporaryDirectory.make()
        var text = ""
        for id in 0..<20 {
            text +=
                #"{"jsonrpc":"2.0","id":\#(id),"method":"request","params":{"path":"/echo","query":{"n":\#(id)}}}"#
                + "\n"
        }
        let input = directory.appendingPathComponent("input.ndjson").path
        let output = directory.appendingPathComponent("output.ndjson").path
        let log = directory.appendingPathComponent("stderr.log").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: input))

        // A file always polls readable: whoever reads it, its end ends the server.
        let child = try ChildProcess(
            "/bin/sh",
            [
                "-c", #"exec "$0" serve --config "$1" --log-level debug < "$2" > "$3" 2> "$4""#,
                RelayProcess.binaryPath, config, input, output, log,
            ],
            environment: ["PATH": "/usr/bin:/bin", "XDG_STATE_HOME": RelayProcess.freshStateHome()])
        #expect(try await child.wait(timeout: .seconds(60)) == .exited(0))
        let answers = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").map {
            try JSONParser.parse(String($0))
        }
        #expect(Set(answers.compactMap { $0["id"]?.numberValue?.intValue }) == Set(0..<20))
        #expect(answers.count == 20)
        #expect(answers.allSatisfy { $0["result"]?["status"] == 200 })
    }
}
