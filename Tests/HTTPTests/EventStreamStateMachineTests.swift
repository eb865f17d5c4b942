import Testing
import TokenRelayErrorKinds

@testable import TokenRelayHTTP

/// ``EventStreamStateMachine``: what a subscription decides for each thing that happens, without a connection.
@Suite struct EventStreamStateMachineTests {
    typealias Machine = EventStreamStateMachine

    static func machine() -> Machine { Machine(policy: EventStreamReconnectPolicy()) }

    /// A connection failure a new connection may cure (a drop), as the event source hands it over.
    static func dropped(_ message: String, kind: ErrorKind = .transport) -> Machine.Failure {
        .connection(EventSourceFailure(kind: kind, message: message), retryable: true)
    }

    /// A connection failure the transport calls final.
    static func refused(_ message: String, kind: ErrorKind) -> Machine.Failure {
        .connection(EventSourceFailure(kind: kind, message: message), retryable: false)
    }

    static func states(_ transition: Machine.Transition) -> [SubscriptionStateChange.State] {
        transition.announce.map(\.state)
    }

    @Test func startAnnouncesTheFirstConnectingAndConnects() {
        var machine = Self.machine()
        let start = machine.start()
        #expect(start.announce == [SubscriptionStateChange(state: .connecting, attempt: 0)])
        #expect(start.next == .connect)
    }

    /// `untilClosed`: a clean end closes without an error; a drop or a 5xx still reconnects (SPEC §5.5).
    @Test func untilClosedEndsOnACleanEndAndStillReconnectsAfterADrop() {
        var machine = Machine(policy: EventStreamReconnectPolicy(), untilClosed: true)
        _ = machine.start()
        _ = machine.responded(
            status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        let dropped = machine.failed(Self.dropped("reset"), serverRetry: nil, jitter: 0)
        #expect(Self.states(dropped) == [.reconnecting])
        _ = machine.waited()
        let failing = machine.responded(status: 503, contentType: nil, retryAfter: nil, serverRetry: nil, jitter: 0)
        #expect(Self.states(failing) == [.reconnecting])
        _ = machine.waited()
        _ = machine.responded(
            status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        machine.eventsDispatched()
        let ended = machine.bodyEnded(serverRetry: nil, jitter: 0)
        #expect(ended.announce == [SubscriptionStateChange(state: .closed)])
        #expect(ended.next == .finish)
        #expect(machine.isFinished)
        // Without it, the same clean end reconnects.
        var live = Self.machine()
        _ = live.start()
        _ = live.responded(status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        #expect(Self.states(live.bodyEnded(serverRetry: nil, jitter: 0)) == [.reconnecting])
    }

    @Test func anEventStreamOpensAndIsRead() {
        var machine = Self.machine()
        _ = machine.start()
        let open = machine.responded(
            status: 200, contentType: "Text/Event-Stream; charset=utf-8", retryAfter: nil, serverRetry: nil, jitter: 0)
        #expect(open.announce == [SubscriptionStateChange(state: .open, status: 200)])
        #expect(open.next == .readBody)
    }

    @Test(arguments: [
        (200, "application/json", "protocol"), (204, "text/event-stream", nil), (401, "text/plain", "auth"),
        (403, "text/plain", "http_status"), (302, "text/plain", "http_status"), (404, "text/plain", "http_status"),
    ])
    func finalAnswersClose(status: Int, contentType: String, kind: String?) {
        var machine = Self.machine()
        let closed = machine.responded(
            status: status, contentType: contentType, retryAfter: nil, serverRetry: nil, jitter: 0)
        #expect(closed.announce.map(\.state) == [.closed])
        #expect(closed.announce.first?.status == status)
        #expect(closed.announce.first?.error?.kind.rawValue == kind)
        #expect(closed.next == .finish)
        #expect(machine.isFinished)
    }

    @Test(arguments: [408, 429, 500, 503])
    func retryableStatusesReconnectAfterTheBackoffHonouringRetryAfter(status: Int) {
        var machine = Self.machine()
        let first = machine.responded(status: status, contentType: nil, retryAfter: nil, serverRetry: nil, jitter: 0)
        #expect(first.next == .wait(milliseconds: 1000))
        #expect(
            first.announce == [
                SubscriptionStateChange(
                    state: .reconnecting, attempt: 1, retryInMs: 1000, status: status,
                    error: EventSourceFailure(kind: .httpStatus, message: "the server answered \(status)"))
            ])
        #expect(machine.waited().announce == [SubscriptionStateChange(state: .connecting, attempt: 1)])
        let second = machine.responded(status: status, contentType: nil, retryAfter: "5", serverRetry: nil, jitter: 0)
        #expect(second.next == .wait(milliseconds: 5000))
        #expect(second.announce.first?.attempt == 2)
    }

    @Test func backoffDoublesUntilAConnectionDeliversAnEventThenStartsOver() {
        var machine = Self.machine()
        var delays: [Machine.Next] = []
        for _ in 0..<3 {
            delays.append(machine.failed(Self.dropped("refused"), serverRetry: nil, jitter: 0).next)
            _ = machine.waited()
        }
        #expect(delays == [.wait(milliseconds: 1000), .wait(milliseconds: 2000), .wait(milliseconds: 4000)])
        _ = machine.responded(
            status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        machine.eventsDispatched()
        let after = machine.bodyEnded(serverRetry: 250, jitter: 0)
        #expect(after.next == .wait(milliseconds: 250))
        #expect(after.announce == [SubscriptionStateChange(state: .reconnecting, attempt: 1, retryInMs: 250)])
    }

    @Test func aConnectionThatOpensButDeliversNothingKeepsBackingOff() {
        var machine = Self.machine()
        _ = machine.failed(Self.dropped("timed out", kind: .timeout), serverRetry: nil, jitter: 0)
        _ = machine.waited()
        _ = machine.responded(
            status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        let ended = machine.bodyEnded(serverRetry: nil, jitter: 0)
        #expect(ended.next == .wait(milliseconds: 2000))
        #expect(ended.announce.first?.attempt == 2)
    }

    @Test func jitterOnlyShortensTheDelay() {
        var machine = Self.machine()
        let jittered = machine.failed(Self.dropped("x"), serverRetry: nil, jitter: 0.999)
        #expect(jittered.next == .wait(milliseconds: 801))
    }

    @Test(arguments: [
        (Self.dropped("timed out", kind: .timeout), "timeout"),
        (Self.dropped("stream stalled", kind: .timeout), "timeout"),
        (Self.dropped("dropped"), "transport"),
    ])
    func retryableFailuresReconnectWithTheirKind(failure: Machine.Failure, kind: String) {
        var machine = Self.machine()
        let transition = machine.failed(failure, serverRetry: nil, jitter: 0)
        #expect(Self.states(transition) == [.reconnecting])
        #expect(transition.announce.first?.error?.kind.rawValue == kind)
        #expect(!machine.isFinished)
    }

    @Test(arguments: [
        (Self.refused("bad header", kind: .invalidParams), "invalid_params", nil as Int?),
        (Self.refused("certificate", kind: .transport), "transport", nil),
        (
            .middleware(EventSourceFailure(kind: .interactionRequired, message: "login needed"), status: nil),
            "interaction_required", nil
        ),
        (.middleware(EventSourceFailure(kind: .auth, message: "renewals paused"), status: 401), "auth", 401),
    ])
    func failuresNoReconnectCanCureClose(failure: Machine.Failure, kind: String, status: Int?) {
        var machine = Self.machine()
        let transition = machine.failed(failure, serverRetry: nil, jitter: 0)
        #expect(Self.states(transition) == [.closed])
        #expect(transition.announce.first?.error?.kind.rawValue == kind)
        #expect(transition.announce.first?.status == status)
        #expect(transition.next == .finish)
    }

    @Test func aReplayIsAnnouncedAsAnImmediateReconnect() {
        var machine = Self.machine()
        _ = machine.start()
        let replay = machine.replayed(status: 401)
        #expect(replay.map(\.state) == [.reconnecting, .connecting])
        #expect(replay[0].retryInMs == 0 && replay[0].status == 401 && replay[0].error?.kind == .auth)
        #expect(replay[0].attempt == 1 && replay[1].attempt == 1)
        // The backoff is not consumed by the replay: the next failure still waits the base delay.
        #expect(machine.failed(Self.dropped("x"), serverRetry: nil, jitter: 0).next == .wait(milliseconds: 1000))
    }

    @Test func anOversizedLineReconnectsWithKindProtocol() {
        var machine = Self.machine()
        _ = machine.responded(
            status: 200, contentType: "text/event-stream", retryAfter: nil, serverRetry: nil, jitter: 0)
        machine.eventsDispatched()
        let transition = machine.streamInvalid(message: "line too long", serverRetry: nil, jitter: 0)
        #expect(transition.announce.first?.error == EventSourceFailure(kind: .protocol, message: "line too long"))
        #expect(transition.announce.first?.attempt == 1)
    }
}
