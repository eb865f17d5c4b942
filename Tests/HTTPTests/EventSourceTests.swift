import Foundation
import TestSupport
import Testing
import TokenRelayErrorKinds

@testable import TokenRelayHTTP

/// End-to-end tests of ``EventSource`` over ``CurlTransport`` against the shared fixture server (`events` role) on 127.0.0.1. Backoff
/// sleeps are recorded and skipped; jitter is 0 unless a test says otherwise.
@Suite struct EventSourceTests {
    let server: EventStreamServer
    let transport: CurlTransport
    let sleeper = RecordingSleep()

    init() async throws {
        server = try await EventStreamServer()
        transport = try CurlTransport(options: .init(streamBufferBytes: 16 << 10))
    }

    func source(
        _ pathAndQuery: String, lastEventID: String? = nil, idleTimeout: Duration? = .seconds(30),
        maxBackoff: Duration = .seconds(30), maxLineLength: Int = 1 << 20,
        jitter: Double = 0
    ) -> EventSource {
        EventSource(
            transport: transport,
            configuration: EventSourceConfiguration(
                request: HTTPRequest(url: server.url(pathAndQuery), headers: HTTPHeaders([("X-Caller", "yes")])),
                lastEventID: lastEventID, idleTimeout: idleTimeout, maxBackoff: maxBackoff,
                maxLineLength: maxLineLength, jitter: { jitter }, sleep: sleeper.sleep))
    }

    @Test func deliversConsecutiveEventsWithStreamHeaders() async throws {
        let updates = await collect(source("/events?key=k")) { $0.isEvent(id: 5) }
        #expect(updates.first == .state(SubscriptionStateChange(state: .connecting, attempt: 0)))
        #expect(updates.dropFirst().first == .state(SubscriptionStateChange(state: .open, status: 200)))
        #expect(updates.eventIDs == [1, 2, 3, 4, 5])
        #expect(updates.last?.event == ServerSentEvent(data: "event 5", lastEventID: "5"))
        let stats = try await server.stats("k", using: transport)
        #expect(stats.requests == 1)
        #expect(stats.last_event_ids == [nil])
        #expect(stats.accepts == ["text/event-stream"])
        #expect(stats.cache_controls == ["no-cache"])
    }

    @Test func resumesWithLastEventIDAcrossDropsWithoutGapOrDuplicate() async throws {
        let updates = await collect(source("/events?key=k&drop_after=3")) { $0.isEvent(id: 10) }
        #expect(updates.eventIDs == Array(1...10))
        let reconnecting = updates.states(.reconnecting)
        #expect(reconnecting.count == 3)
        // Every connection delivered events, so each reconnect is attempt 1 with the base delay.
        #expect(reconnecting.allSatisfy { $0.attempt == 1 && $0.retryInMs == 1000 && $0.error?.kind == .transport })
        #expect(updates.states(.connecting).map(\.attempt) == [0, 1, 1, 1])
        #expect(sleeper.milliseconds == [1000, 1000, 1000])
        let stats = try await server.stats("k", using: transport)
        #expect(stats.last_event_ids == [nil, "3", "6", "9"])
    }

    @Test func reconnectingIsAnnouncedBeforeConnecting() async throws {
        let updates = await collect(source("/events?key=k&drop_after=1")) { $0.isEvent(id: 2) }
        let states = updates.compactMap(\.stateChange).map(\.state)
        #expect(states == [.connecting, .open, .reconnecting, .connecting, .open])
    }

    @Test func resumesFromTheConfiguredLastEventID() async throws {
        let updates = await collect(source("/events?key=k", lastEventID: "41")) { $0.event != nil }
        #expect(updates.eventIDs == [42])
        #expect(try await server.stats("k", using: transport).last_event_ids == ["41"])
    }

    @Test func cleanEndOfTheBodyReconnectsWithoutAnError() async throws {
        let updates = await collect(source("/events?key=k&end_after=2")) { $0.isEvent(id: 3) }
        #expect(updates.eventIDs == [1, 2, 3])
        let reconnecting = try #require(updates.states(.reconnecting).first)
        #expect(reconnecting.error == nil && reconnecting.status == nil && reconnecting.retryInMs == 1000)
    }

    @Test func noContentClosesWithoutReconnecting() async throws {
        let updates = await collect(source("/status/204?key=k"))
        #expect(
            updates == [
                .state(SubscriptionStateChange(state: .connecting, attempt: 0)),
                .state(SubscriptionStateChange(state: .closed, status: 204)),
            ])
        #expect(try await server.stats("k", using: transport).requests == 1)
    }

    @Test(arguments: [400, 403, 404, 410, 302])
    func nonRetryableStatusCloses(status: Int) async throws {
        let updates = await collect(source("/status/\(status)?key=k"))
        let closed = try #require(updates.last?.stateChange)
        #expect(closed.state == .closed && closed.status == status && closed.error?.kind == .httpStatus)
        #expect(updates.states(.reconnecting).isEmpty)
        #expect(try await server.stats("k", using: transport).requests == 1)
    }

    @Test func anotherContentTypeClosesWithAProtocolError() async throws {
        let updates = await collect(source("/events?key=k&content_type=application/json"))
        let closed = try #require(updates.last?.stateChange)
        #expect(closed.state == .closed && closed.status == 200 && closed.error?.kind == .protocol)
        #expect(updates.eventIDs.isEmpty)
    }

    @Test func serverErrorsBackOffExponentiallyUpToTheCapThenOpen() async throws {
        let updates = await collect(source("/events?key=k&fail=5&code=500", maxBackoff: .seconds(3))) {
            $0.event != nil
        }
        let reconnecting = updates.states(.reconnecting)
        #expect(reconnecting.map(\.attempt) == [1, 2, 3, 4, 5])
        #expect(reconnecting.map(\.retryInMs) == [1000, 2000, 3000, 3000, 3000])
        #expect(reconnecting.allSatisfy { $0.status == 500 && $0.error?.kind == .httpStatus })
        #expect(sleeper.milliseconds == [1000, 2000, 3000, 3000, 3000])
        #expect(updates.eventIDs == [1])
    }

    @Test func jitterOnlyShortensDelays() async throws {
        let updates = await collect(source("/events?key=k&fail=2&code=503", jitter: 0.999)) { $0.event != nil }
        #expect(updates.states(.reconnecting).map(\.retryInMs) == [801, 1601])
    }

    @Test(arguments: [429, 503, 408])
    func retryAfterIsTheMinimumDelay(status: Int) async throws {
        let updates = await collect(source("/events?key=k&fail=1&code=\(status)&retry_after=5")) { $0.event != nil }
        let reconnecting = try #require(updates.states(.reconnecting).first)
        #expect(reconnecting.status == status && reconnecting.retryInMs == 5000)
        #expect(updates.eventIDs == [1])
    }

    @Test func serverRetryIsTheBackoffBaseAndRidesOnlyOnItsEvent() async throws {
        let updates = await collect(source("/events?key=k&retry=250&drop_after=2")) { $0.isEvent(id: 3) }
        let events = updates.compactMap(\.event)
        #expect(events.map(\.retry) == [250, nil, 250])
        #expect(updates.states(.reconnecting).map(\.retryInMs) == [250])
    }

    @Test func stalledConnectionReconnectsAfterTheIdleTimeout() async throws {
        let updates = await collect(source("/events?key=k&stall_after=1", idleTimeout: .milliseconds(300))) {
            $0.isEvent(id: 2)
        }
        #expect(updates.eventIDs == [1, 2])
        let reconnecting = try #require(updates.states(.reconnecting).first)
        #expect(reconnecting.error?.kind == .timeout)
        #expect(try await server.awaitEvent("closed", key: "k", using: transport))
        #expect(try await server.stats("k", using: transport).last_event_ids == [nil, "1"])
    }

    @Test func oversizedLineBreaksTheConnectionAndResumesAfterTheLastEvent() async throws {
        let updates = await collect(source("/events?key=k&huge_after=2", maxLineLength: 1024)) { $0.isEvent(id: 3) }
        #expect(updates.eventIDs == [1, 2, 3])
        let reconnecting = try #require(updates.states(.reconnecting).first)
        #expect(reconnecting.error?.kind == .protocol)
        #expect(try await server.awaitEvent("closed", key: "k", using: transport))
        #expect(try await server.stats("k", using: transport).last_event_ids.prefix(2) == [nil, "2"])
    }
}
