import Foundation
import Synchronization
import TestSupport
import Testing
import TokenRelayAuth
import TokenRelayErrorKinds

@testable import TokenRelayHTTP

/// ``EventSource`` through a pipeline with Auth's credentials middleware (one recovery budget per subscription, as the
/// relay builds it), a slow consumer and cancellation, against the shared fixture server (`events` role).
@Suite struct EventSourceRecoveryTests {
    let server: EventStreamServer
    let transport: CurlTransport
    let sleeper = RecordingSleep()
    static let bufferBytes = 16 << 10

    init() async throws {
        server = try await EventStreamServer()
        transport = try CurlTransport(options: .init(streamBufferBytes: Self.bufferBytes))
    }

    func source(
        _ pathAndQuery: String, credentials: (any CredentialSource)? = nil, idleTimeout: Duration? = .seconds(30),
        sleep: (@Sendable (Duration) async throws -> Void)? = nil
    ) -> EventSource {
        let pipeline = HTTPClient(
            transport: transport,
            middlewares: credentials.map {
                [
                    CredentialsMiddleware(
                        source: $0, origins: OriginPolicy(baseURL: server.url("/")), budget: AuthRecoveryBudget())
                ]
            } ?? [])
        return EventSource(
            transport: pipeline,
            configuration: EventSourceConfiguration(
                request: HTTPRequest(url: server.url(pathAndQuery)), idleTimeout: idleTimeout, jitter: { 0 },
                sleep: sleep ?? sleeper.sleep))
    }

    // MARK: Auth recovery

    @Test func expiredTokensAreRenewedBecauseEachOpenRestoresTheBudget() async throws {
        let tokens = VersionedTokens()
        // tok-1 is expired; every later token is good for one connection, which drops after 2 events.
        let updates = await collect(source("/events?key=k&expired=1&uses=1&drop_after=2", credentials: tokens)) {
            $0.isEvent(id: 6)
        }
        #expect(updates.eventIDs == Array(1...6))
        let stats = try await server.stats("k", using: transport)
        #expect(
            stats.authorizations == [
                "Bearer tok-1", "Bearer tok-2", "Bearer tok-2", "Bearer tok-3", "Bearer tok-3", "Bearer tok-4",
            ])
        #expect(stats.last_event_ids == [nil, nil, "2", "2", "4", "4"])
        #expect(tokens.invalidated == [1, 2, 3])
        let renewals = updates.states(.reconnecting).filter { $0.status == 401 }
        #expect(renewals.count == 3)
        #expect(renewals.allSatisfy { $0.retryInMs == 0 && $0.error?.kind == .auth })
        #expect(!updates.states(.closed).contains { _ in true })
    }

    @Test func secondUnauthorizedWithoutAnOpenCloses() async throws {
        let tokens = VersionedTokens()
        let updates = await collect(source("/events?key=k&expired=1,2", credentials: tokens))
        let closed = try #require(updates.last?.stateChange)
        #expect(closed.state == .closed && closed.status == 401 && closed.error?.kind == .auth)
        #expect(updates.states(.reconnecting).count == 1)
        #expect(tokens.invalidated == [1])
        let stats = try await server.stats("k", using: transport)
        #expect(stats.requests == 2)
        #expect(stats.authorizations == ["Bearer tok-1", "Bearer tok-2"])
    }

    @Test func staticCredentialsAreNeverRenewed() async throws {
        let tokens = VersionedTokens(renewable: false)
        let updates = await collect(source("/events?key=k&expired=1", credentials: tokens))
        let closed = try #require(updates.last?.stateChange)
        #expect(closed.state == .closed && closed.status == 401 && closed.error?.kind == .auth)
        #expect(tokens.invalidated.isEmpty)
        #expect(try await server.stats("k", using: transport).requests == 1)
    }

    @Test(arguments: [ErrorKind.interactionRequired, nil])
    func credentialErrorClosesWithItsKind(kind: ErrorKind?) async throws {
        let error: any Error & Sendable = kind.map { WireKindedError(errorKind: $0) } ?? KindlessError()
        let updates = await collect(source("/events?key=k", credentials: FailingCredentials(error: error)))
        let closed = try #require(updates.last?.stateChange)
        #expect(closed.state == .closed && closed.error?.kind == kind ?? .auth)
        #expect(updates.count == 2)
        #expect(try await server.stats("k", using: transport).requests == 0)
    }

    // MARK: Back-pressure

    @Test func slowConsumerPausesTheTransferAndLosesNothing() async throws {
        let source = source("/events?key=k&pad=1000")
        let outcome = await withSafetyNet { [server, transport] () async -> (Bool, Int, [Int])? in
            var iterator = source.makeAsyncIterator()
            var ids: [Int] = []
            while ids.count < 10, let update = await iterator.next() {
                if let id = update.event?.lastEventID.flatMap({ Int($0) }) { ids.append(id) }
            }
            // Stop pulling: the server must find its socket unwritable (nothing buffers without bound here).
            guard let blocked = try? await server.awaitEvent("blocked", key: "k", using: transport),
                let written = try? await server.stats("k", using: transport).written
            else { return nil }
            while ids.count < written + 100, let update = await iterator.next() {
                if let id = update.event?.lastEventID.flatMap({ Int($0) }) { ids.append(id) }
            }
            return (blocked, written, ids)
        }
        let (blocked, written, ids) = try #require(outcome ?? nil)
        #expect(blocked)
        // What the server got out while we read 10 events is bounded by our buffer and the kernel's socket buffers.
        #expect(written - 10 < (Self.bufferBytes + (16 << 20)) / 1000)
        #expect(ids == Array(1...(written + 100)))
    }

    // MARK: Cancellation

    @Test func cancellingTheConsumerEndsQuietlyAndClosesTheConnection() async throws {
        let (reading, signal) = AsyncStream<Void>.makeStream()
        let source = source("/events?key=k&stall_after=1")
        let consumer = Task {
            var iterator = source.makeAsyncIterator()
            var updates: [EventSourceUpdate] = []
            while let update = await iterator.next() {
                updates.append(update)
                if update.event != nil { signal.yield() }
            }
            return updates
        }
        var signals = reading.makeAsyncIterator()
        await signals.next()
        consumer.cancel()
        let updates = await withSafetyNet { await consumer.value } ?? []
        #expect(updates.eventIDs == [1])
        #expect(updates.states(.closed).isEmpty)
        #expect(try await server.awaitEvent("closed", key: "k", using: transport))
    }

    @Test func droppingTheIteratorClosesTheConnection() async throws {
        let source = source("/events?key=k&stall_after=1")
        do {
            var iterator = source.makeAsyncIterator()
            while let update = await iterator.next(), update.event == nil {}
        }
        #expect(try await server.awaitEvent("closed", key: "k", using: transport))
    }

    @Test func cancellingDuringTheBackoffSleepEnds() async throws {
        let (sleeping, signal) = AsyncStream<Void>.makeStream()
        let source = source("/status/503?key=k") { _ in
            signal.yield()
            try await Task.sleep(for: .seconds(3600))
        }
        let consumer = Task { await collect(source) }
        var signals = sleeping.makeAsyncIterator()
        await signals.next()
        consumer.cancel()
        let updates = await withSafetyNet { await consumer.value } ?? []
        #expect(updates.compactMap(\.stateChange).map(\.state) == [.connecting, .reconnecting])
        #expect(try await server.stats("k", using: transport).requests == 1)
    }

    @Test func cancellingDuringTheCredentialWaitEnds() async throws {
        let (waiting, signal) = AsyncStream<Void>.makeStream()
        let source = source("/events?key=k", credentials: PendingCredentials(started: signal))
        let consumer = Task { await collect(source) }
        var signals = waiting.makeAsyncIterator()
        await signals.next()
        consumer.cancel()
        let updates = await withSafetyNet { await consumer.value } ?? []
        #expect(updates.compactMap(\.stateChange).map(\.state) == [.connecting])
        #expect(try await server.stats("k", using: transport).requests == 0)
    }
}

/// Hands out `Bearer tok-N`, N being the current version; invalidation bumps it.
final class VersionedTokens: CredentialSource {
    let isRenewable: Bool
    private let state = Mutex((version: UInt64(1), invalidated: [UInt64]()))

    init(renewable: Bool = true) { isRenewable = renewable }

    var invalidated: [UInt64] { state.withLock { $0.invalidated } }

    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        let version = state.withLock { $0.version }
        request.headers.set(name: "Authorization", value: "Bearer tok-\(version)")
        return CredentialStamp(version)
    }

    func invalidate(stamp: CredentialStamp) async throws {
        state.withLock { s in
            s.invalidated.append(stamp.value)
            if s.version == stamp.value { s.version += 1 }
        }
    }
}

/// An error that names its wire kind, as the token manager's will.
struct WireKindedError: KindedError, CustomStringConvertible {
    let errorKind: ErrorKind
    var description: String { "login needed" }
}

/// An error that names no kind.
struct KindlessError: Error, CustomStringConvertible {
    var description: String { "refused" }
}

/// Fails every acquisition with `error`.
struct FailingCredentials: CredentialSource {
    let error: any Error & Sendable
    var isRenewable: Bool { true }
    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp { throw error }
    func invalidate(stamp: CredentialStamp) async throws {}
}

/// An acquisition that waits (cancellably) for an hour, signalling when it starts.
struct PendingCredentials: CredentialSource {
    let started: AsyncStream<Void>.Continuation
    var isRenewable: Bool { true }
    func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
        started.yield()
        try await Task.sleep(for: .seconds(3600))
        return CredentialStamp(1)
    }
    func invalidate(stamp: CredentialStamp) async throws {}
}
