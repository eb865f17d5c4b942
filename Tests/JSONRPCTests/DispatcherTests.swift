import Synchronization
import Testing

@testable import TokenRelayJSONRPC

@Suite struct DispatcherTests {
    struct Fixture {
        let sink = RecordingSink()
        let gate = Gate()
        let dispatcher: Dispatcher

        init(limits: DispatcherLimits = DispatcherLimits(), answersClientCancellation: Bool = true) {
            let gate = self.gate
            dispatcher = Dispatcher(
                methods: [
                    "ping": { _, _ in JSONValue.object([:]) },
                    "echo": { params, _ in params ?? JSONValue.null },
                    "wait": { _, _ in
                        await gate.pass()
                        try Task.checkCancellation()
                        return JSONValue.string("done")
                    },
                    "hang": { _, _ in
                        await gate.pass()
                        try await Task.sleep(for: .seconds(3600))
                        return JSONValue.string("late")
                    },
                    "fail": { _, _ in throw RPCError(code: .auth, message: "refused") },
                ], sink: sink, limits: limits, errorMapper: RPCError.testMapper,
                answersClientCancellation: answersClientCancellation)
        }

        func send(_ text: String) { dispatcher.receive(Array(text.utf8)) }
    }

    @Test func requestsAreAnsweredWithTheirIDs() async {
        let fixture = Fixture()
        fixture.send(
            #"{"jsonrpc":"2.0","id":12345678901234567890,"method":"echo","params":{"n":98765432109876543210}}"#)
        let messages = await fixture.sink.waitFor(1)
        #expect(
            messages[0].jsonText == #"{"jsonrpc":"2.0","id":12345678901234567890,"result":{"n":98765432109876543210}}"#)
    }

    @Test func unknownMethodsAndInvalidRequestsGetErrors() async {
        let fixture = Fixture()
        fixture.send(#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#)
        fixture.send(#"{"jsonrpc":"2.0","method":"nope"}"#)
        fixture.send(#"{"jsonrpc":"2.0","id":2}"#)
        fixture.send(#"{"jsonrpc":"2.0","id":3,"method":"fail"}"#)
        fixture.send("{oops")
        let messages = await fixture.sink.waitFor(4)
        let byID = Dictionary(grouping: messages) { $0["id"]?.jsonText ?? "" }
        #expect(byID["1"]?.first?["error"]?["code"] == .int(-32601))
        #expect(byID["1"]?.first?["error"]?["data"]?["kind"] == "method_not_found")
        #expect(byID["2"]?.first?["error"]?["code"] == .int(-32600))
        #expect(byID["3"]?.first?["error"]?["data"]?["kind"] == "auth")
        #expect(byID["null"]?.first?["error"]?["code"] == .int(-32700))
        #expect(messages.count == 4, "the unknown notification gets no reply")
    }

    @Test func batchesAreAnsweredAsOneArrayWithoutNotificationEntries() async {
        let fixture = Fixture()
        fixture.send(
            #"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"nope"},7]"#
        )
        let messages = await fixture.sink.waitFor(1)
        guard case .array(let answers) = messages[0] else {
            Issue.record("expected an array")
            return
        }
        #expect(answers.count == 3)
        let ids = Set(answers.map { $0["id"]?.jsonText ?? "" })
        #expect(ids == ["1", #""b""#, "null"])
    }

    @Test func emptyBatchIsOneInvalidRequestAndAllNotificationBatchGetsNothing() async {
        let fixture = Fixture()
        fixture.send(#"[{"jsonrpc":"2.0","method":"ping"}]"#)
        fixture.send("[]")
        let messages = await fixture.sink.waitFor(1)
        #expect(messages.count == 1)
        #expect(messages[0]["error"]?["code"] == .int(-32600))
        #expect(messages[0]["id"] == .null)
    }

    @Test(arguments: ["$/cancelRequest", "notifications/cancelled"])
    func cancellingARunningRequestAnswersItWithRequestCancelled(method: String) async {
        let fixture = Fixture()
        fixture.send(#"{"jsonrpc":"2.0","id":"slow","method":"hang"}"#)
        await fixture.gate.waitForArrivals(1)
        fixture.gate.open()
        let params = method == "$/cancelRequest" ? #"{"id":"slow"}"# : #"{"requestId":"slow"}"#
        fixture.send(#"{"jsonrpc":"2.0","method":"\#(method)","params":\#(params)}"#)
        let messages = await fixture.sink.waitFor(1)
        #expect(messages[0]["id"] == "slow")
        #expect(messages[0]["error"]?["code"] == .int(-32800))
        #expect(messages[0]["error"]?["data"]?["kind"] == "cancelled")
    }

    /// MCP: a request its client cancelled with `notifications/cancelled` is not answered
    /// (running or queued); `$/cancelRequest` and other requests still are.
    @Test func aDispatcherForMCPDoesNotAnswerClientCancelledRequests() async {
        let fixture = Fixture(
            limits: DispatcherLimits(maximumConcurrent: 1, maximumQueued: 4), answersClientCancellation: false)
        fixture.send(#"{"jsonrpc":"2.0","id":"running","method":"hang"}"#)
        await fixture.gate.waitForArrivals(1)
        fixture.gate.open()
        fixture.send(#"{"jsonrpc":"2.0","id":"queued","method":"ping"}"#)
        fixture.send(#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"queued"}}"#)
        fixture.send(#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"running"}}"#)
        await fixture.dispatcher.waitUntilIdle()
        fixture.send(#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#)
        let messages = await fixture.sink.waitFor(1)
        #expect(messages.map { $0["id"] } == ["after"])
    }

    @Test(.timeLimit(.minutes(5)))
    func waitUntilIdleReturnsWhenItsTaskIsCancelledWhileARequestStillRuns() async {
        let fixture = Fixture()
        fixture.send(#"{"jsonrpc":"2.0","id":"slow","method":"hang"}"#)
        await fixture.gate.waitForArrivals(1)
        fixture.gate.open()
        let waiter = Task { [dispatcher = fixture.dispatcher] in await dispatcher.waitUntilIdle() }
        waiter.cancel()
        await waiter.value  // hangs (until the time limit) if the wait ignores cancellation
        #expect(fixture.dispatcher.inFlightCount == 1, "the request is still running")
        fixture.dispatcher.cancelAll()
        await fixture.dispatcher.waitUntilIdle()
    }

    @Test func cancelAllAnsweringShuttingDownAnswersRunningAndQueuedRequestsWithThatKind() async {
        let fixture = Fixture(limits: DispatcherLimits(maximumConcurrent: 1, maximumQueued: 1))
        fixture.send(#"{"jsonrpc":"2.0","id":1,"method":"hang"}"#)
        fixture.send(#"{"jsonrpc":"2.0","id":2,"method":"hang"}"#)
        await fixture.gate.waitForArrivals(1)
        fixture.gate.open()
        fixture.dispatcher.cancelAll(answering: .shuttingDown)
        let messages = await fixture.sink.waitFor(2)
        #expect(Set(messages.compactMap { $0["id"]?.jsonText }) == ["1", "2"])
        #expect(messages.allSatisfy { $0["error"]?["data"]?["kind"] == "shutting_down" }, "\(messages)")
        await fixture.dispatcher.waitUntilIdle()
    }

    @Test func requestsBeyondTheConcurrencyBoundQueueAndBeyondTheQueueGetLimitErrors() async {
        let fixture = Fixture(limits: DispatcherLimits(maximumConcurrent: 2, maximumQueued: 3))
        for id in 1...7 { fixture.send(#"{"jsonrpc":"2.0","id":\#(id),"method":"wait"}"#) }
        await fixture.gate.waitForArrivals(2)
        // 2 executing, 3 queued, 2 rejected at once.
        let rejected = await fixture.sink.waitFor(2)
        #expect(Set(rejected.map { $0["id"]?.jsonText ?? "" }) == ["6", "7"])
        #expect(rejected.allSatisfy { $0["error"]?["data"]?["kind"] == "limit" })
        // Cancel a queued request: answered at once, never executed.
        fixture.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":4}}"#)
        let afterCancel = await fixture.sink.waitFor(3)
        #expect(afterCancel[2]["id"] == 4)
        #expect(afterCancel[2]["error"]?["code"] == .int(-32800))
        fixture.gate.open()
        let all = await fixture.sink.waitFor(7)
        let done = all.filter { $0["result"] == "done" }.compactMap { $0["id"]?.jsonText }
        #expect(Set(done) == ["1", "2", "3", "5"])
        await fixture.dispatcher.waitUntilIdle()
        #expect(fixture.gate.arrivedCount == 4, "the cancelled queued request never ran")
    }

    /// Handlers that wait for a person (`ask`) outside their slot, beside work (`wait`) in one.
    struct SlotFixture {
        let sink = RecordingSink()
        let person = Gate()
        let work = Gate()
        let held = Gate()
        let dispatcher: Dispatcher

        init(maximumConcurrent: Int = 1, maximumQueued: Int = 1) {
            let (person, work, held) = (self.person, self.work, self.held)
            dispatcher = Dispatcher(
                methods: [
                    "ping": { _, _ in JSONValue.object([:]) },
                    "ask": { _, context in
                        try await context.withoutExecutionSlot { await person.pass() }
                        return JSONValue.string("asked")
                    },
                    "wait": { _, _ in
                        await work.pass()
                        return JSONValue.string("done")
                    },
                    "hold": { _, _ in
                        await held.pass()
                        return JSONValue.string("held")
                    },
                ], sink: sink,
                limits: DispatcherLimits(maximumConcurrent: maximumConcurrent, maximumQueued: maximumQueued),
                errorMapper: RPCError.testMapper, unboundedMethods: ["ping"])
        }

        func send(_ text: String) { dispatcher.receive(Array(text.utf8)) }

        /// The limit still holds (1 executing, 1 queued, the next refused): no slot was lost or
        /// counted twice.
        func expectTheLimitHolds() async {
            let before = sink.messages.count
            for id in ["l1", "l2", "l3"] { send(#"{"jsonrpc":"2.0","id":"\#(id)","method":"hold"}"#) }
            let refused = await sink.waitFor(before + 1)
            #expect(refused[before]["id"] == "l3" && refused[before]["error"]?["data"]?["kind"] == "limit")
            #expect(held.arrivedCount <= 1)
            held.open()
            let messages = await sink.waitFor(before + 3)
            #expect(messages[before...].filter { $0["result"] == "held" }.count == 2)
            await dispatcher.waitUntilIdle()
            #expect(held.arrivedCount == 2)
        }
    }

    /// A request waiting for a person leaves its slot: with a limit of 1, others still run, and
    /// the limit still holds once the person answered.
    @Test(.timeLimit(.minutes(5)))
    func aHandlerWaitingOutsideItsSlotLetsOtherRequestsRun() async {
        let fixture = SlotFixture()
        for id in 1...3 {
            fixture.send(#"{"jsonrpc":"2.0","id":"ask\#(id)","method":"ask"}"#)
            await fixture.person.waitForArrivals(id)
        }
        fixture.send(#"{"jsonrpc":"2.0","id":"work","method":"wait"}"#)
        await fixture.work.waitForArrivals(1)
        fixture.work.open()
        let first = await fixture.sink.waitFor(1)
        #expect(first[0]["id"] == "work" && first[0]["result"] == "done")
        fixture.person.open()
        let all = await fixture.sink.waitFor(4)
        #expect(all.filter { $0["result"] == "asked" }.count == 3)
        await fixture.dispatcher.waitUntilIdle()
        await fixture.expectTheLimitHolds()
    }

    /// A handler taking its slot back waits while the slot works for another request; cancelled
    /// then, it is answered and leaves the count right.
    @Test(.timeLimit(.minutes(5)))
    func aHandlerCancelledWhileTakingItsSlotBackIsAnswered() async {
        let fixture = SlotFixture()
        fixture.send(#"{"jsonrpc":"2.0","id":"ask","method":"ask"}"#)
        await fixture.person.waitForArrivals(1)
        fixture.send(#"{"jsonrpc":"2.0","id":"work","method":"wait"}"#)
        await fixture.work.waitForArrivals(1)
        fixture.person.open()
        fixture.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"ask"}}"#)
        let first = await fixture.sink.waitFor(1)
        #expect(first[0]["id"] == "ask" && first[0]["error"]?["code"] == .int(-32800), "\(first)")
        fixture.work.open()
        let both = await fixture.sink.waitFor(2)
        #expect(both[1]["id"] == "work" && both[1]["result"] == "done")
        await fixture.dispatcher.waitUntilIdle()
        await fixture.expectTheLimitHolds()
    }

    /// An unbounded method is answered while every slot works and the queue is full.
    @Test(.timeLimit(.minutes(5)))
    func unboundedMethodsAreAnsweredWhileEverySlotIsBusy() async {
        let fixture = SlotFixture()
        fixture.send(#"{"jsonrpc":"2.0","id":"w1","method":"wait"}"#)
        fixture.send(#"{"jsonrpc":"2.0","id":"w2","method":"wait"}"#)
        await fixture.work.waitForArrivals(1)
        fixture.send(#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        let first = await fixture.sink.waitFor(1)
        #expect(first[0]["id"] == "p" && first[0]["result"] == .object([:]))
        fixture.work.open()
        _ = await fixture.sink.waitFor(3)
        await fixture.dispatcher.waitUntilIdle()
        await fixture.expectTheLimitHolds()
    }

    @Test func duplicateIDsInFlightAreRejected() async {
        let fixture = Fixture()
        fixture.send(#"{"jsonrpc":"2.0","id":9,"method":"wait"}"#)
        await fixture.gate.waitForArrivals(1)
        fixture.send(#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)
        let first = await fixture.sink.waitFor(1)
        #expect(first[0]["error"]?["code"] == .int(-32600))
        fixture.gate.open()
        let both = await fixture.sink.waitFor(2)
        #expect(both[1]["result"] == "done")
    }

    @Test func afterShutdownBeginsRequestsAreRefused() async {
        let fixture = Fixture()
        fixture.dispatcher.beginShutdown()
        fixture.send(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        let messages = await fixture.sink.waitFor(1)
        #expect(messages[0]["error"]?["data"]?["kind"] == "shutting_down")
    }

    @Test func paramsMustBeAnObjectForParamReader() throws {
        #expect(throws: RPCError.self) { try ParamReader(.array([1]), allowed: []) }
        var reader = try ParamReader(["a": 1, "zzz": true], allowed: ["a"])
        _ = reader.string("a")
        do {
            try reader.finish()
            Issue.record("expected invalid params")
        } catch {
            let pointers = (error.data["diagnostics"]?.arrayValue ?? []).compactMap { $0["pointer"]?.stringValue }
            #expect(Set(pointers) == ["/a", "/zzz"])
        }
    }
}

/// `shutdown` then `exit`: the exit code is decided in read order, not by which handler runs
/// first (SPEC §4.2: exit code 0 after shutdown, 1 without).
@Suite struct ShutdownOrderTests {
    final class Seen: Sendable {
        let values = Mutex<[Bool]>([])
        let signal = OneShotSignal()
    }

    static func dispatcher(_ seen: Seen, sink: RecordingSink) -> Dispatcher {
        Dispatcher(
            methods: [
                // A shutdown handler that has not run yet when `exit` is read.
                "shutdown": { _, _ in
                    try await Task.sleep(for: .seconds(3600))
                    return JSONValue.null
                }
            ],
            notifications: [
                "exit": { _, context in
                    seen.values.withLock { $0.append(context.afterShutdown) }
                    seen.signal.fire()
                    return JSONValue.null
                }
            ], sink: sink, errorMapper: RPCError.testMapper)
    }

    @Test func exitReadAfterShutdownKnowsItWhileTheShutdownHandlerIsStillRunning() async {
        let seen = Seen()
        let dispatcher = Self.dispatcher(seen, sink: RecordingSink())
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#.utf8))
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","method":"exit"}"#.utf8))
        await seen.signal.wait()
        #expect(seen.values.withLock { $0 } == [true])
        dispatcher.cancelAll()
    }

    @Test func aReadOrderNotificationHasRunWhenReceiveReturns() {
        let seen = Seen()
        let dispatcher = Dispatcher(
            methods: ["shutdown": { _, _ in JSONValue.null }],
            readOrderNotifications: ["exit": { context in seen.values.withLock { $0.append(context.afterShutdown) } }],
            sink: RecordingSink(), errorMapper: RPCError.testMapper)
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","method":"exit"}"#.utf8))
        #expect(seen.values.withLock { $0 } == [false], "ran on the reader's thread, before receive returned")
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#.utf8))
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","method":"exit"}"#.utf8))
        #expect(seen.values.withLock { $0 } == [false, true])
    }

    @Test func exitReadBeforeShutdownDoesNotCountAShutdownReadLater() async {
        let seen = Seen()
        let dispatcher = Self.dispatcher(seen, sink: RecordingSink())
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","method":"exit"}"#.utf8))
        dispatcher.receive(Array(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#.utf8))
        await seen.signal.wait()
        #expect(seen.values.withLock { $0 } == [false])
        dispatcher.cancelAll()
    }
}
