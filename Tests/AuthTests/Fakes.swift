import Foundation
import Synchronization
import TokenRelayHTTP
import TokenRelayPlatform

@testable import TokenRelayAuth

/// A one-shot signal tests wait on (no sleeps).
final class Signal: Sendable {
    private struct State {
        var fired = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isFired: Bool { state.withLock { $0.fired } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.fired { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A counter tests can wait on until it reaches a target.
final class CountWatcher: Sendable {
    private struct State {
        var count = 0
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    @discardableResult
    func increment() -> Int {
        let (count, ready) = state.withLock { state -> (Int, [CheckedContinuation<Void, Never>]) in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.0 <= count }.map(\.1)
            state.waiters.removeAll { $0.0 <= count }
            return (count, ready)
        }
        for waiter in ready { waiter.resume() }
        return count
    }

    var count: Int { state.withLock { $0.count } }

    func wait(for target: Int) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.count >= target { return true }
                state.waiters.append((target, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// Holds its callers from ``hold()`` until ``release()`` (which lets every held caller go and
/// stops holding). The fakes below hold requests, loads and saves with it.
final class HoldGate: Sendable {
    private struct State {
        var holding = false
        var held: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func hold() { state.withLock { $0.holding = true } }

    func release() {
        let held = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    /// Returns at once unless holding; then waits for ``release()``.
    func pass() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if !state.holding { return true }
                state.held.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A transport that answers from a queue (then a fallback), records every request, and can hold
/// requests behind a gate.
final class FakeTransport: HTTPTransport {
    private struct State {
        var requests: [HTTPRequest] = []
        var queue: [Result<HTTPResponse, HTTPError>] = []
    }
    private let state = Mutex(State())
    private let gate = HoldGate()
    private let fallback: @Sendable (HTTPRequest) -> Result<HTTPResponse, HTTPError>
    /// Counts arrivals.
    let arrivals = CountWatcher()

    init(
        fallback: @escaping @Sendable (HTTPRequest) -> Result<HTTPResponse, HTTPError> = { _ in
            .success(tokenResponse())
        }
    ) {
        self.fallback = fallback
    }

    var requests: [HTTPRequest] { state.withLock { $0.requests } }
    var tokenRequests: [HTTPRequest] { requests.filter { $0.method == "POST" } }

    func enqueue(_ results: Result<HTTPResponse, HTTPError>...) { state.withLock { $0.queue += results } }

    /// Holds every request from now on until ``release()``.
    func hold() { gate.hold() }

    func release() { gate.release() }

    func send(_ request: HTTPRequest) async throws -> HTTPStreamingResponse {
        state.withLock { $0.requests.append(request) }
        arrivals.increment()
        await gate.pass()
        let next = state.withLock { state in state.queue.isEmpty ? nil : state.queue.removeFirst() }
        return HTTPStreamingResponse(try (next ?? fallback(request)).get())
    }
}

/// Builds a JSON token response.
func tokenResponse(
    _ accessToken: String = "at-1", expiresIn: Int? = 3600, refreshToken: String? = nil, status: Int = 200
) -> HTTPResponse {
    var members = [#""access_token":"\#(accessToken)""#, #""token_type":"Bearer""#]
    if let expiresIn { members.append(#""expires_in":\#(expiresIn)"#) }
    if let refreshToken { members.append(#""refresh_token":"\#(refreshToken)""#) }
    return json("{" + members.joined(separator: ",") + "}", status: status)
}

func json(_ text: String, status: Int = 200, headers: [(String, String)] = []) -> HTTPResponse {
    var fields = HTTPHeaders()
    fields.add(name: "Content-Type", value: "application/json")
    for (name, value) in headers { fields.add(name: name, value: value) }
    return HTTPResponse(status: status, headers: fields, body: Array(text.utf8))
}

func oauthError(_ error: String, status: Int = 400, description: String? = nil) -> HTTPResponse {
    let extra = description.map { #","error_description":"\#($0)""# } ?? ""
    return json(#"{"error":"\#(error)"\#(extra)}"#, status: status)
}

/// A clock tests move by hand; with `autoAdvance`, sleeping moves it instantly.
final class FakeClock: AuthClock {
    private struct Sleeper {
        let id: UInt64
        let until: Date
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var now = Date(timeIntervalSince1970: 1_800_000_000)
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        var sleeps: [TimeInterval] = []
    }
    private let state = Mutex(State())
    let autoAdvance: Bool
    /// Counts sleepers registered (manual mode).
    let sleepersRegistered = CountWatcher()

    init(autoAdvance: Bool = false) { self.autoAdvance = autoAdvance }

    var now: Date { state.withLock { $0.now } }
    /// Durations of the sleeps taken in auto-advance mode.
    var sleeps: [TimeInterval] { state.withLock { $0.sleeps } }

    func advance(by seconds: TimeInterval) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.addingTimeInterval(seconds)
            let now = state.now
            let due = state.sleepers.filter { $0.until <= now }
            state.sleepers.removeAll { $0.until <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    func sleep(until deadline: Date) async throws {
        if autoAdvance {
            state.withLock { state in
                state.sleeps.append(deadline.timeIntervalSince(state.now))
                if deadline > state.now { state.now = deadline }
            }
            try Task.checkCancellation()
            return
        }
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let immediate = state.withLock { state -> Bool in
                    if deadline <= state.now { return true }
                    state.sleepers.append(Sleeper(id: id, until: deadline, continuation: continuation))
                    return false
                }
                if immediate { continuation.resume() } else { sleepersRegistered.increment() }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}

/// A store that records saves and can hold loads or saves behind a gate, or fail saves. Leases,
/// seeds and renewal counts are those of an ``InMemoryTokenStore``. Entries are keyed by the
/// session alone (a seed fingerprint makes no difference here).
final class FakeStore: TokenStore {
    private struct State {
        var entries: [SessionKey: StoredTokens] = [:]
        var failSaves = false
    }
    private let state = Mutex(State())
    private let loadGate = HoldGate()
    private let saveGate = HoldGate()
    private let shared = InMemoryTokenStore()
    let loads = CountWatcher()
    let saves = CountWatcher()
    let savesStarted = CountWatcher()

    var info: TokenStoreInfo { TokenStoreInfo(type: "fake") }

    func entry(_ key: SessionKey) -> StoredTokens? {
        state.withLock { $0.entries[key] }
    }
    func put(_ tokens: StoredTokens, for key: SessionKey) {
        state.withLock { $0.entries[key] = tokens }
    }
    func holdLoads() { loadGate.hold() }
    func holdSaves() { saveGate.hold() }
    func failSaves(_ fail: Bool) { state.withLock { $0.failSaves = fail } }

    /// Lets every held load and save go, and holds no more.
    func release() {
        loadGate.release()
        saveGate.release()
    }

    func load(_ key: StoreKey) async throws -> StoredTokens? {
        loads.increment()
        await loadGate.pass()
        return state.withLock { $0.entries[key.session] }
    }

    struct SaveFailed: Error {}

    func save(_ tokens: StoredTokens, for key: StoreKey, logoutEpoch: Int64?) async throws -> Int64? {
        savesStarted.increment()
        await saveGate.pass()
        let logouts = try await shared.logoutEpoch(key)
        let revision = state.withLock { state -> Int64?? in
            if state.failSaves { return nil }
            if let logoutEpoch, logoutEpoch != logouts { return .some(nil) }
            var entry = tokens
            entry.revision = (state.entries[key.session]?.revision ?? 0) + 1
            entry.invalidated = false
            state.entries[key.session] = entry
            return entry.revision
        }
        guard let revision else { throw SaveFailed() }
        saves.increment()
        return revision
    }

    func remove(_ key: StoreKey) async throws { state.withLock { $0.entries[key.session] = nil } }

    func logoutEpoch(_ key: StoreKey) async throws -> Int64 { try await shared.logoutEpoch(key) }

    func logOut(_ key: StoreKey) async throws {
        try await shared.logOut(key)
        state.withLock { $0.entries[key.session] = nil }
    }

    @discardableResult
    func recordInvalidation(_ key: StoreKey, revision: Int64?) throws -> Bool {
        state.withLock { state in
            guard var entry = state.entries[key.session] else { return false }
            if let revision, revision != entry.revision || entry.invalidated { return false }
            entry.invalidated = true
            state.entries[key.session] = entry
            return true
        }
    }

    func changedElsewhere() -> Bool { false }

    func acquireLease(_ key: StoreKey, purpose: LeasePurpose, deadline: Date, expiresAt: Date) async throws
        -> StoreLease
    {
        try await shared.acquireLease(key, purpose: purpose, deadline: deadline, expiresAt: expiresAt)
    }

    func releaseLease(_ lease: StoreLease) { shared.releaseLease(lease) }
    func isSeedSpent(_ fingerprint: String) async throws -> Bool { try await shared.isSeedSpent(fingerprint) }
    func markSeedSpent(_ fingerprint: String) async throws { try await shared.markSeedSpent(fingerprint) }
    func recordUnexplainedRenewal(_ key: StoreKey, at date: Date, window: TimeInterval) throws -> Int {
        try shared.recordUnexplainedRenewal(key, at: date, window: window)
    }
    func clearUnexplainedRenewals(_ key: StoreKey) throws { try shared.clearUnexplainedRenewals(key) }

    func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        try await shared.loadRegistration(issuer: issuer)
    }

    func saveRegistration(_ registration: ClientRegistration) async throws {
        try await shared.saveRegistration(registration)
    }

    func removeRegistration(issuer: String) async throws { try await shared.removeRegistration(issuer: issuer) }
}

/// The secret used by the default harness configuration (a canary for leak checks).
let clientSecretCanary = "svc-secret-canary-5f1e"

/// Everything a manager test needs.
struct Harness {
    let transport: FakeTransport
    let clock: FakeClock
    let store: FakeStore
    let manager: TokenManager
    let key: SessionKey

    init(
        configuration: OAuthClientConfiguration = .init(
            tokenURL: "https://as.example/token", clientID: "svc", clientSecret: .value(clientSecretCanary)),
        transport: FakeTransport = FakeTransport(), clock: FakeClock = FakeClock(), store: FakeStore = FakeStore(),
        retryPolicy: RetryPolicy = RetryPolicy(), taskExecutor: (any TaskExecutor)? = nil
    ) async throws {
        self.transport = transport
        self.clock = clock
        self.store = store
        manager = Placement.withOwnTasks(on: taskExecutor) {
            TokenManager(transport: transport, store: store, clock: clock, random: { 0.5 }, retryPolicy: retryPolicy)
        }
        key = try await manager.register(environment: "staging", profile: "service", configuration: configuration)
    }

    func token(deadline: Date? = nil) async throws -> Token { try await manager.token(for: key, deadline: deadline) }

    /// Puts the session's tokens in the store: an access token received `age` seconds ago that
    /// expires `expiresIn` seconds from now (negative: expired).
    func storeToken(
        _ accessToken: String, expiresIn: TimeInterval, age: TimeInterval = 0, refreshToken: String? = nil
    ) {
        store.put(
            StoredTokens(
                accessToken: accessToken, receivedAt: clock.now.addingTimeInterval(-age),
                expiresAt: clock.now.addingTimeInterval(expiresIn), refreshToken: refreshToken),
            for: key)
    }

    /// The form fields of a request body (last value wins).
    static func form(_ request: HTTPRequest) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in formPairs(request) { fields[name] = value }
        return fields
    }

    /// The form fields of a request body, in order.
    static func formPairs(_ request: HTTPRequest) -> [(String, String)] {
        let text = String(decoding: request.body ?? [], as: UTF8.self)
        let decode = { (s: String) in s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? s }
        return text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}

/// Configuration for a refresh_token profile seeded with `seed`.
func refreshConfiguration(seed: String = "rt-seed-0001", skew: Duration = .seconds(30)) -> OAuthClientConfiguration {
    OAuthClientConfiguration(
        tokenURL: "https://as.example/token", clientID: "app", clientSecret: .value("app-secret-canary-77"),
        expirySkew: skew, grant: .refreshToken(seed: .value(seed)))
}

/// Collects events from a manager.
final class EventRecorder: Sendable {
    private let box = EventBox()
    let count = CountWatcher()
    /// Fired when the manager's event stream ends (after `close()`).
    let finished = Signal()

    init(_ manager: TokenManager) {
        Task { [box, count, finished] in
            for await event in manager.events {
                box.append(event)
                count.increment()
            }
            finished.fire()
        }
    }

    var all: [AuthEvent] { box.all }
}

final class EventBox: Sendable {
    private let events = Mutex<[AuthEvent]>([])
    func append(_ event: AuthEvent) { events.withLock { $0.append(event) } }
    var all: [AuthEvent] { events.withLock { $0 } }
}

extension FakeTransport {
    /// A transport answering every request with a new token `at-N` (N counting from 1).
    static func counting(expiresIn: Int? = 3600, refreshToken: Bool = false) -> FakeTransport {
        let counter = Atomic<Int>(0)
        return FakeTransport { _ in
            let n = counter.add(1, ordering: .relaxed).newValue
            return .success(
                tokenResponse("at-\(n)", expiresIn: expiresIn, refreshToken: refreshToken ? "rt-\(n)" : nil))
        }
    }
}

/// Waits (yielding, no sleeps) until `condition` holds.
func waitUntil(_ condition: @Sendable () async -> Bool) async {
    while !(await condition()) { await Task.yield() }
}
