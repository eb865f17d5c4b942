import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// `subscribe` / `unsubscribe` through the real binary against the interop resource server's
/// SSE endpoints (scripts/interop/rs/app.py): ids delivered in order across dropped connections
/// and expiring tokens, the ends of a subscription (unsubscribe, 204, 403), batches refused and
/// the reply written before the subscription's first notification.
@Suite(.serialized) struct SubscriptionInteropTests {
    static func serviceProfile(_ stack: InteropStack) -> [(name: String, lines: [String])] {
        [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))]
    }

    static func startRelay(_ stack: InteropStack) throws -> RelayProcess {
        try stack.startRelay(profiles: serviceProfile(stack), environment: ["SECRET": "svc-secret"], logLevel: "info")
    }

    @Test func consecutiveIdsAreDeliveredAsEventNotifications() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let sub = try await relay.subscribe(["path": "/events?count=-1&interval=0.05"])
            let lines = try await relay.waitForLines(what: "20 ticks") { $0.ticks(of: sub).count >= 20 }
            let ticks = lines.ticks(of: sub)
            #expect(Array(ticks.prefix(20)) == Array(1...20))
            let first = lines.notifications(of: sub).first { $0["method"] == "event" }
            #expect(first?["params"]?["event"]?.stringValue == "tick")
            #expect(first?["params"]?["id"]?.stringValue == "1")
            #expect(first?["params"]?["data"]?.stringValue == #"{"seq": 1}"#)
            let states = lines.states(of: sub).compactMap { $0["state"]?.stringValue }
            #expect(Array(states.prefix(2)) == ["connecting", "open"])
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 1, "\(status.jsonText)")
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            let last = relay.parsedLines.notifications(of: sub).last
            #expect(last?["method"] == "subscription-state" && last?["params"]?["state"] == "closed", "EOF closes it")
        }
    }

    @Test func droppedConnectionsResumeWithLastEventIdWithoutGapOrDuplicate() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let sub = try await relay.subscribe(["path": "/events?count=-1&interval=0.02&drop_after=7&retry=100"])
            let lines = try await relay.waitForLines(what: "40 ticks over dropped connections") {
                $0.ticks(of: sub).count >= 40
            }
            let ticks = lines.ticks(of: sub)
            #expect(ticks == Array(1...ticks.count), "no gap, no duplicate: \(ticks)")
            let reconnects = lines.states(of: sub).filter { $0["state"] == "reconnecting" }
            #expect(reconnects.count >= 5, "a drop every 7 events")
            for state in reconnects {
                #expect(state["attempt"]?.intValue ?? 0 >= 1, "\(state.jsonText)")
                #expect(state["retryInMs"]?.intValue != nil, "\(state.jsonText)")
            }
            #expect(try await stack.issuedCount(client: "svc") == 1, "reconnects reuse the valid token")
            let closed = try await relay.call("unsubscribe", ["subscription": .string(sub)])
            #expect(closed["result"]?["closed"] == true, "\(closed.jsonText)")
        }
    }

    @Test func expiringAccessTokenIsRenewedMidStreamAndIdsStayContiguous() async throws {
        try await InteropStack.with(.init(accessTTL: 2)) { stack in
            let relay = try Self.startRelay(stack)
            let sub = try await relay.subscribe(["path": "/events?count=-1&interval=0.1&retry=100"])
            // The RS ends the stream with `token-expired` at the token's exp; two of them and ten
            // ticks after the second cover at least two token lifetimes.
            let lines = try await relay.waitForLines(timeout: .seconds(180), what: "two token lifetimes") { lines in
                let events = lines.notifications(of: sub).filter { $0["method"] == "event" }
                guard
                    let second = events.indices.filter({ events[$0]["params"]?["event"] == "token-expired" })
                        .dropFirst().first
                else { return false }
                return events[(second + 1)...].filter { $0["params"]?["event"] == "tick" }.count >= 10
            }
            let ticks = lines.ticks(of: sub)
            #expect(ticks == Array(1...ticks.count), "contiguous across renewals: \(ticks)")
            #expect(try await stack.issuedCount(client: "svc") >= 2)
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 1)
            let closed = lines.states(of: sub).filter { $0["state"] == "closed" }
            #expect(closed.isEmpty, "never closed by an expiring token: \(closed)")
        }
    }

    @Test func unsubscribeSendsClosedThenTheReplyAndNothingAfter() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let sub = try await relay.subscribe(["path": "/events?count=-1&interval=0.02"])
            let clock = try await relay.subscribe(["path": "/public/events?count=-1&interval=0.02", "auth": false])
            _ = try await relay.waitForLines(what: "5 ticks") { $0.ticks(of: sub).count >= 5 }
            let answer = try await relay.call("unsubscribe", ["subscription": .string(sub)])
            #expect(answer["result"]?["subscription"]?.stringValue == sub, "\(answer.jsonText)")
            #expect(answer["result"]?["closed"] == true)
            // The other subscription keeps ticking: let it deliver 30 more events as a clock.
            let ticksAtUnsubscribe = relay.parsedLines.ticks(of: clock).count
            let lines = try await relay.waitForLines(what: "30 more ticks of the other subscription") {
                $0.ticks(of: clock).count >= ticksAtUnsubscribe + 30
            }
            let replyIndex = try #require(lines.firstIndex { $0["id"] == answer["id"] })
            let own = lines.indices.filter { lines[$0]["params"]?["subscription"]?.stringValue == sub }
            let lastIndex = try #require(own.last)
            #expect(lastIndex < replyIndex, "nothing of the subscription after the reply")
            #expect(
                lines[lastIndex]["method"] == "subscription-state" && lines[lastIndex]["params"]?["state"] == "closed")
            #expect(own.filter { lines[$0]["params"]?["state"] == "closed" }.count == 1)
            let again = try await relay.call("unsubscribe", ["subscription": .string(sub)])
            #expect(again["error"]?["code"]?.intValue == -32602, "\(again.jsonText)")
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 1)
        }
    }

    @Test func noContentClosesWithStatus204AndNeverReconnects() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let tag = "nocontent-\(UUID().uuidString.prefix(8))"
            let sub = try await relay.subscribe([
                "path": "/events/nocontent", "headers": ["X-Request-Tag": .string(tag)],
            ])
            let lines = try await relay.waitForLines(what: "closed") { $0.closedState(of: sub) != nil }
            let closed = try #require(lines.closedState(of: sub))
            #expect(closed["status"]?.intValue == 204, "\(closed.jsonText)")
            #expect(closed["error"] == nil, "204 is a clean end: \(closed.jsonText)")
            #expect(!lines.states(of: sub).contains { $0["state"] == "reconnecting" })
            #expect(try await stack.received(tag: tag) == 1)
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 0, "\(status.jsonText)")
            #expect(try await stack.received(tag: tag) == 1, "still one request after the status round trip")
        }
    }

    @Test func forbiddenClosesWithStatus403() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let tag = "forbidden-\(UUID().uuidString.prefix(8))"
            let sub = try await relay.subscribe([
                "path": "/events/forbidden", "headers": ["X-Request-Tag": .string(tag)],
            ])
            let lines = try await relay.waitForLines(what: "closed") { $0.closedState(of: sub) != nil }
            let closed = try #require(lines.closedState(of: sub))
            #expect(closed["status"]?.intValue == 403, "\(closed.jsonText)")
            #expect(closed["error"]?["kind"]?.stringValue != nil, "\(closed.jsonText)")
            #expect(!lines.states(of: sub).contains { $0["state"] == "reconnecting" })
            #expect(try await stack.received(tag: tag) == 1)
        }
    }

    @Test func subscribeInsideABatchIsRejected() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            try relay.send(
                #"[{"jsonrpc":"2.0","id":"b1","method":"subscribe","params":{"path":"/events"}},"#
                    + #"{"jsonrpc":"2.0","id":"b2","method":"ping"}]"#)
            let lines = try await relay.lines(atLeast: 1)
            let batch = try #require(lines.first?.arrayValue, "\(lines)")
            let refused = try #require(batch.first { $0["id"] == "b1" })
            #expect(refused["error"]?["code"]?.intValue == -32600, "\(refused.jsonText)")
            #expect(batch.contains { $0["id"] == "b2" && $0["result"] != nil })
            let status = try await relay.call("status")
            #expect(status["result"]?["subscriptions"]?.intValue == 0)
        }
    }

    @Test func subscribeReplyPrecedesEveryFirstNotificationAcrossFiftySubscriptions() async throws {
        try await InteropStack.with { stack in
            let relay = try Self.startRelay(stack)
            let count = 50
            var text = ""
            for index in 0..<count {
                let params = #"{"path":"/public/events?count=3&interval=0&retry=30000","auth":false}"#
                text += #"{"jsonrpc":"2.0","id":"s\#(index)","method":"subscribe","params":\#(params)}"# + "\n"
            }
            try relay.write(text)
            let lines = try await relay.waitForLines(minimum: count * 4, what: "3 ticks on each of 50 subscriptions") {
                lines in
                let ids = lines.compactMap { $0["result"]?["subscription"]?.stringValue }
                return ids.count == count && ids.allSatisfy { lines.ticks(of: $0).count >= 3 }
            }
            for (index, line) in lines.enumerated() {
                guard let sub = line["result"]?["subscription"]?.stringValue else { continue }
                let first = lines.firstIndex { $0["params"]?["subscription"]?.stringValue == sub }
                #expect(
                    first.map { $0 > index } ?? false,
                    "reply of \(sub) at \(index), first notification at \(String(describing: first))")
                #expect(lines.ticks(of: sub).prefix(3) == [1, 2, 3])
            }
            try relay.closeStdin()
            #expect(try await relay.exitCode() == 0)
            let final = relay.parsedLines
            for sub in final.compactMap({ $0["result"]?["subscription"]?.stringValue }) {
                #expect(final.notifications(of: sub).last?["params"]?["state"] == "closed", "\(sub) closed at EOF")
            }
        }
    }
}

// MARK: - Helpers shared by the subscription tests

extension RelayProcess {
    /// Sends `subscribe` and returns the subscription id of its reply.
    func subscribe(_ params: JSONValue, timeout: Duration = .seconds(120)) async throws -> String {
        let answer = try await call("subscribe", params, timeout: timeout)
        guard let id = answer["result"]?["subscription"]?.stringValue else {
            throw InteropStack.Failure(description: "subscribe failed: \(answer.jsonText)")
        }
        return id
    }

    /// The parsed stdout lines once `done` holds for them; re-checked as lines arrive, starting
    /// from `minimum` lines (each check re-parses everything, so a good minimum saves work).
    func waitForLines(
        minimum: Int = 1, timeout: Duration = .seconds(120), what: String, _ done: ([JSONValue]) -> Bool
    ) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + timeout
        var wanted = minimum
        while true {
            let lines = try await lines(atLeast: wanted, timeout: max(deadline - ContinuousClock.now, .milliseconds(1)))
            if done(lines) { return lines }
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
            wanted = lines.count + 1
        }
    }

    /// tokenrelay's resident set size in bytes (VmRSS of /proc/PID/status).
    var residentBytes: Int? { Self.residentBytes(pid: pid) }

    static func residentBytes(pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            return kilobytes.map { $0 * 1024 }
        }
        return nil
    }
}

extension Array where Element == JSONValue {
    /// The notifications of subscription `sub`, in order.
    func notifications(of sub: String) -> [JSONValue] {
        filter { $0["method"] != nil && $0["params"]?["subscription"]?.stringValue == sub }
    }

    /// The ids of `tick` events of `sub`, in order of arrival.
    func ticks(of sub: String) -> [Int] {
        notifications(of: sub).compactMap { line in
            guard line["method"] == "event", line["params"]?["event"] == "tick" else { return nil }
            return line["params"]?["id"]?.stringValue.flatMap { Int($0) }
        }
    }

    /// The params of `sub`'s `subscription-state` notifications.
    func states(of sub: String) -> [JSONValue] {
        notifications(of: sub).filter { $0["method"] == "subscription-state" }.compactMap { $0["params"] }
    }

    /// The params of `sub`'s `closed` state, once sent.
    func closedState(of sub: String) -> JSONValue? { states(of: sub).first { $0["state"] == "closed" } }
}
