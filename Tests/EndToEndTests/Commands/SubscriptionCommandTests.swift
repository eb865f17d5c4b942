import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `tokenrelay subscribe PATH`: the shell-friendly one-shot form against the interop RS.
@Suite(.serialized) struct SubscriptionCommandTests {
    @Test func subscribeCommandPrintsEventsAsJSONLinesAndExitsZeroOnSigterm() async throws {
        try await InteropStack.with { stack in
            let config = try stack.writeConfig(profiles: SubscriptionInteropTests.serviceProfile(stack))
            let relay = try RelayProcess(
                ["subscribe", "/events?count=-1&interval=0.05", "--config", config],
                environment: ["SECRET": "svc-secret"],
                testMethods: false)
            let lines = try await relay.lines(atLeast: 10)
            for (index, line) in lines.prefix(10).enumerated() {
                #expect(line["event"]?.stringValue == "tick", "\(line.jsonText)")
                #expect(line["id"]?.stringValue == String(index + 1), "\(line.jsonText)")
                #expect(line["data"]?.stringValue == #"{"seq": \#(index + 1)}"#, "\(line.jsonText)")
                #expect(line["subscription"] == nil && line["jsonrpc"] == nil, "bare event objects: \(line.jsonText)")
            }
            // Started off the main thread, the child inherited SIGTERM blocked; tokenrelay unblocks it.
            relay.signal(SIGTERM)
            #expect(try await relay.exitCode() == 0, "\(relay.stderrText)")
            #expect(try await stack.issuedCount(client: "svc") == 1)
        }
    }

    @Test func subscribeCommandResumesAfterLastEventIdAndEndsOn204() async throws {
        try await InteropStack.with { stack in
            let config = try stack.writeConfig(profiles: SubscriptionInteropTests.serviceProfile(stack))
            let relay = try RelayProcess(
                ["subscribe", "/events?count=-1&interval=0.05", "--config", config, "--last-event-id", "41"],
                environment: ["SECRET": "svc-secret"], testMethods: false)
            let lines = try await relay.lines(atLeast: 3)
            #expect(lines.prefix(3).compactMap { $0["id"]?.stringValue } == ["42", "43", "44"])
            relay.signal(SIGINT)
            #expect(try await relay.exitCode() == 0, "\(relay.stderrText)")

            let ended = try RelayProcess(
                ["subscribe", "/events/nocontent", "--config", config], environment: ["SECRET": "svc-secret"],
                testMethods: false)
            #expect(try await ended.exitCode() == 0, "a 204 ends the stream cleanly: \(ended.stderrText)")
            #expect(ended.stdoutText.isEmpty)
        }
    }
}
