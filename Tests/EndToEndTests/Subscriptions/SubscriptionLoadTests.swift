import Foundation
import Synchronization
import Testing

@testable import TokenRelayJSONRPC

/// Subscriptions under load through the real binary: 200 concurrent streams, a stalled reader
/// (memory stays bounded, nothing dropped) and one fast stream's throughput. Memory is measured
/// from /proc/PID/status; the throughput is printed, never asserted.
@Suite(.serialized) struct SubscriptionLoadTests {
    @Test func twoHundredConcurrentSubscriptionsAllDeliverTheirEvents() async throws {
        try await InteropStack.with(.init(rsCache: 60)) { stack in
            let relay = try SubscriptionInteropTests.startRelay(stack)
            #expect(try await relay.call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
            let idle = relay.residentBytes
            let count = 200
            let perStream = 5
            var text = ""
            for index in 0..<count {
                // retry=30000: after its 5 events each stream ends and waits 30 s before reconnecting.
                let params = #"{"path":"/events?count=\#(perStream)&interval=0.2&retry=30000"}"#
                text += #"{"jsonrpc":"2.0","id":"c\#(index)","method":"subscribe","params":\#(params)}"# + "\n"
            }
            let start = ContinuousClock.now
            try relay.write(text)
            let lines = try await relay.waitForLines(
                minimum: count * (perStream + 1), timeout: .seconds(300), what: "5 events on each of 200 subscriptions"
            ) { lines in
                let ids = lines.compactMap { $0["result"]?["subscription"]?.stringValue }
                return ids.count == count && ids.allSatisfy { lines.ticks(of: $0).count >= perStream }
            }
            let wall = ContinuousClock.now - start
            let loaded = relay.residentBytes
            let subs = lines.compactMap { $0["result"]?["subscription"]?.stringValue }
            #expect(Set(subs).count == count)
            for sub in subs {
                // On a very slow run a stream may already have reconnected (after ~30 s) and resumed at 6.
                let ticks = lines.ticks(of: sub)
                #expect(ticks == Array(1...max(ticks.count, 1)) && ticks.count >= perStream, "\(sub): \(ticks)")
                #expect(lines.closedState(of: sub) == nil, "\(sub)")
            }
            #expect(try await stack.issuedCount(client: "svc") == 1, "200 streams share one token")
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == count, "\(status.jsonText)")
            if let idle, let loaded {
                let perSubscription = (loaded - idle) / count
                print(
                    "subscriptions: \(count) concurrent, \(count * perStream) events in \(wall); RSS idle \(idle / 1024) KiB, "
                        + "with \(count) open \(loaded / 1024) KiB, about \(perSubscription / 1024) KiB per subscription"
                )
                #expect(loaded < 300 * 1024 * 1024, "RSS \(loaded) bytes with \(count) subscriptions")
            }
            try relay.closeStdin()
            #expect(try await relay.exitCode(timeout: .seconds(120)) == 0)
            let final = relay.parsedLines
            #expect(subs.allSatisfy { final.closedState(of: $0) != nil }, "every subscription closed at EOF")
        }
    }

    @Test func stalledReaderKeepsMemoryBoundedAndLosesNoEvent() async throws {
        try await InteropStack.with { stack in
            let config = try stack.writeConfig(profiles: SubscriptionInteropTests.serviceProfile(stack))
            let relay = try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: ["SECRET": "svc-secret"], testMethods: false)
            let params = #"{"path":"/public/events?count=-1&interval=0&size=1024","auth":false}"#
            // Nobody reads stdout now: the pipe fills, then the writer's queue, then the
            // subscription must wait and its transfer pause.
            relay.pauseStdout(true)
            try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"subscribe","params":\#(params)}"#)
            try await relay.waitForStderr("stdout backed up", timeout: .seconds(180))
            let firstRSS = try #require(relay.residentBytes)
            let firstSent = try await Self.eventsSent(stack)
            // From the moment the output is full, nothing may grow: that takes time to show.
            try await Task.sleep(for: .seconds(5))
            let secondRSS = try #require(relay.residentBytes)
            let secondSent = try await Self.eventsSent(stack)
            print(
                "stalled reader: RSS \(firstRSS / 1024) KiB when the output was full, \(secondRSS / 1024) KiB 5 s "
                    + "later; RS events sent \(firstSent) then \(secondSent)")
            #expect(secondRSS < 100 * 1024 * 1024, "RSS \(secondRSS) bytes")
            #expect(secondRSS - firstRSS < 16 * 1024 * 1024, "RSS grew from \(firstRSS) to \(secondRSS) bytes")

            // Read again: everything the server sent so far arrives, in order, nothing dropped.
            let wanted = secondSent + 200
            relay.pauseStdout(false)
            let parsed = try await relay.waitForLines(
                minimum: wanted + 3, timeout: .seconds(180), what: "\(wanted) ticks after the stall"
            ) { lines in
                let sub = lines.first?["result"]?["subscription"]?.stringValue ?? "sub-1"
                return lines.ticks(of: sub).count >= wanted
            }
            #expect(
                parsed.first?["id"] == 1 && parsed.first?["result"]?["subscription"] != nil, "the reply comes first")
            let sub = parsed.first?["result"]?["subscription"]?.stringValue ?? "sub-1"
            let ticks = parsed.ticks(of: sub)
            #expect(ticks.count >= wanted)
            #expect(ticks == Array(1...max(ticks.count, 1)), "contiguous after the stall (\(ticks.count) ticks)")
            #expect(
                !parsed.states(of: sub).contains { $0["state"] == "reconnecting" }, "a paused transfer is not a stall")
        }
    }

    @Test func oneFastStreamThroughputThroughAPipe() async throws {
        try await InteropStack.with { stack in
            let relay = try SubscriptionInteropTests.startRelay(stack)
            let events = 20000
            let start = ContinuousClock.now
            let sub = try await relay.subscribe(["path": "/public/events?count=-1&interval=0", "auth": false])
            // reply, connecting, open, then the events
            let lines = try await relay.lines(atLeast: events + 3, timeout: .seconds(300))
            let wall = ContinuousClock.now - start
            let ticks = lines.ticks(of: sub)
            #expect(ticks.count >= events - 10)
            #expect(ticks == Array(1...max(ticks.count, 1)))
            let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
            print("throughput: \(ticks.count) events in \(wall), about \(Int(Double(ticks.count) / seconds)) events/s")
            _ = try await relay.call("unsubscribe", ["subscription": .string(sub)])
        }
    }

    static func eventsSent(_ stack: InteropStack) async throws -> Int {
        let health = try await stack.curl(["-sS", "\(stack.rsURL)/healthz"])
        return health.body?["events_sent"]?.intValue ?? 0
    }
}
