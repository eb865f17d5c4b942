import Foundation
import Synchronization
import Testing
import TokenRelayHTTP

/// The shared fixture server in its `events` role (`TestSupport/Fixtures/fixture_server.py`),
/// one per test, stopped with SIGKILL.
public final class EventStreamServer: Sendable {
    public let fixture: FixtureServer
    public let port: Int

    public init() async throws {
        fixture = try await FixtureServer(role: "events", ports: 1)
        port = fixture.ports[0]
    }

    /// An absolute URL on the server.
    public func url(_ pathAndQuery: String) -> String { "http://127.0.0.1:\(port)\(pathAndQuery)" }

    /// What the server recorded for `key`.
    public struct Stats: Decodable, Sendable {
        public let requests: Int
        public let last_event_ids: [String?]
        public let authorizations: [String?]
        public let accepts: [String?]
        public let cache_controls: [String?]
        public let written: Int
        public let events: [String]
    }

    public func stats(_ key: String, using transport: CurlTransport) async throws -> Stats {
        let response = try await transport.send(collecting: HTTPRequest(url: url("/stats?key=\(key)")))
        return try JSONDecoder().decode(Stats.self, from: Data(response.body))
    }

    /// Blocks (server side, 10 s max) until the server recorded `event` for `key`; whether it did.
    public func awaitEvent(_ event: String, key: String, using transport: CurlTransport) async throws -> Bool {
        let response = try await transport.send(collecting: HTTPRequest(url: url("/await?key=\(key)&event=\(event)")))
        return response.status == 200
    }
}

/// Records the backoff delays asked for and returns at once.
public final class RecordingSleep: Sendable {
    private let delays = Mutex<[Int]>([])

    public init() {}

    public var milliseconds: [Int] { delays.withLock { $0 } }

    public var sleep: @Sendable (Duration) async throws -> Void {
        { [self] duration in
            let (seconds, attoseconds) = duration.components
            delays.withLock { $0.append(Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)) }
            try Task.checkCancellation()
        }
    }
}

/// Runs `body`, cancelling it after `seconds` as a safety net (never expected to fire: generous,
/// for a loaded machine); `nil` when it did.
public func withSafetyNet<T: Sendable>(
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

/// Runs `body`, failing with `HTTPError.timeout` after `seconds` (a safety net, never the
/// expected path: generous, for a loaded machine).
public func withSafetyNet<T: Sendable>(
    seconds: Int = 300, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw HTTPError.timeout
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw HTTPError.cancelled }
        return first
    }
}

/// Collects the updates of `source` up to and including the first for which `stop` holds (or its end).
public func collect(
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
    public var event: ServerSentEvent? {
        if case .event(let event) = self { return event }
        return nil
    }

    /// The state change, if this is one.
    public var stateChange: SubscriptionStateChange? {
        if case .state(let state) = self { return state }
        return nil
    }

    /// Whether this is the event with ID `id`.
    public func isEvent(id: Int) -> Bool { event?.lastEventID == String(id) }
}

extension Array where Element == EventSourceUpdate {
    /// The IDs of the events, as integers.
    public var eventIDs: [Int] { compactMap { $0.event?.lastEventID.flatMap { Int($0) } } }

    /// The state changes in `state`.
    public func states(_ state: SubscriptionStateChange.State) -> [SubscriptionStateChange] {
        compactMap(\.stateChange).filter { $0.state == state }
    }
}
