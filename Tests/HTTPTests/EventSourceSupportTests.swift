import Foundation
import Synchronization
import TestSupport
import Testing
import TokenRelayAuth
import TokenRelayErrorKinds

@testable import TokenRelayHTTP

#if canImport(Glibc)
    import Glibc
#endif

/// The shared fixture server in its `events` role (`TestSupport/Fixtures/fixture_server.py`),
/// one per test, stopped with SIGKILL.
final class EventStreamServer: Sendable {
    let fixture: FixtureServer
    let port: Int

    init() async throws {
        fixture = try await FixtureServer(role: "events", ports: 1)
        port = fixture.ports[0]
    }

    /// An absolute URL on the server.
    func url(_ pathAndQuery: String) -> String { "http://127.0.0.1:\(port)\(pathAndQuery)" }

    /// What the server recorded for `key`.
    struct Stats: Decodable {
        let requests: Int
        let last_event_ids: [String?]
        let authorizations: [String?]
        let accepts: [String?]
        let cache_controls: [String?]
        let written: Int
        let events: [String]
    }

    func stats(_ key: String, using transport: CurlTransport) async throws -> Stats {
        let response = try await transport.send(collecting: HTTPRequest(url: url("/stats?key=\(key)")))
        return try JSONDecoder().decode(Stats.self, from: Data(response.body))
    }

    /// Blocks (server side, 10 s max) until the server recorded `event` for `key`; whether it did.
    func awaitEvent(_ event: String, key: String, using transport: CurlTransport) async throws -> Bool {
        let response = try await transport.send(collecting: HTTPRequest(url: url("/await?key=\(key)&event=\(event)")))
        return response.status == 200
    }
}

/// Records the backoff delays asked for and returns at once.
final class RecordingSleep: Sendable {
    private let delays = Mutex<[Int]>([])

    var milliseconds: [Int] { delays.withLock { $0 } }

    var sleep: @Sendable (Duration) async throws -> Void {
        { [self] duration in
            delays.withLock { $0.append(EventSourceConfiguration.milliseconds(duration)) }
            try Task.checkCancellation()
        }
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

/// Runs `body`, cancelling it after `seconds` as a safety net (never expected to fire: generous,
/// for a loaded machine); `nil` when it did.
func withSafetyNet<T: Sendable>(
    seconds: Int = 300, _ body: @escaping @Sendable () async -> T
) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        if first == nil { Issue.record("the safety net of \(seconds) s ran out") }
        return first
    }
}

/// Collects the updates of `source` up to and including the first for which `stop` holds (or its end).
func collect(
    _ source: EventSource, until stop: @escaping @Sendable (EventSourceUpdate) -> Bool = { _ in false }
) async -> [EventSourceUpdate] {
    await withSafetyNet {
        var updates: [EventSourceUpdate] = []
        for await update in source {
            updates.append(update)
            if stop(update) { break }
        }
        return updates
    } ?? []
}

extension EventSourceUpdate {
    /// The event, if this is one.
    var event: ServerSentEvent? {
        if case .event(let event) = self { return event }
        return nil
    }

    /// The state change, if this is one.
    var stateChange: SubscriptionStateChange? {
        if case .state(let state) = self { return state }
        return nil
    }

    /// Whether this is the event with ID `id`.
    func isEvent(id: Int) -> Bool { event?.lastEventID == String(id) }
}

extension Array where Element == EventSourceUpdate {
    /// The IDs of the events, as integers.
    var eventIDs: [Int] { compactMap { $0.event?.lastEventID.flatMap { Int($0) } } }

    /// The state changes in `state`.
    func states(_ state: SubscriptionStateChange.State) -> [SubscriptionStateChange] {
        compactMap(\.stateChange).filter { $0.state == state }
    }
}
