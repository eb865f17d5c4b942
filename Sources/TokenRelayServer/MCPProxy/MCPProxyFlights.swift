import Synchronization
import TokenRelayJSONRPC
import TokenRelayLogging

/// What `mcp-proxy` has in flight (SPEC §9.6): the host's requests not answered yet, so that each
/// is answered exactly once, and the messages being forwarded, at most `limit` at once (serve's
/// `max_concurrent_requests`): stdin is not read while they are all taken, so a host that writes
/// thousands of requests at once never puts more than `limit` POSTs in flight.
public final class MCPProxyFlights: Sendable {
    private struct State {
        /// The ids of the host's requests forwarded and not answered yet (their JSON text).
        var unanswered: Set<String> = []
        var running = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
        var onRoom: [@Sendable () -> Void] = []
    }

    /// Messages forwarded at once.
    public let limit: Int
    private let state = Mutex(State())

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Whether another message may be read now; when not, `resume` is called once one may.
    public func hasRoom(orWhenRoom resume: @escaping @Sendable () -> Void) -> Bool {
        let room = state.withLock { state in
            if state.running < limit { return true }
            state.onRoom.append(resume)
            return false
        }
        if !room { log.debug("mcp-proxy: \(limit) messages in flight: stdin paused") }
        return room
    }

    /// Takes a place for one message, waiting while all are taken.
    func begin() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.running < limit {
                    state.running += 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives the place back (handed to a waiting message, else free: a paused stdin resumes).
    func end() {
        let (next, resumed) = state.withLock { state -> (CheckedContinuation<Void, Never>?, [@Sendable () -> Void]) in
            if !state.waiting.isEmpty { return (state.waiting.removeFirst(), []) }
            state.running -= 1
            defer { state.onRoom = [] }
            return (nil, state.onRoom)
        }
        next?.resume()
        for resume in resumed { resume() }
    }

    /// The host's request `id` was forwarded: one answer to it is awaited.
    func awaitAnswer(_ id: JSONValue) {
        _ = state.withLock { $0.unanswered.insert(Self.key(id)) }
    }

    /// Whether `id` still awaits its answer.
    func isAwaited(_ id: JSONValue) -> Bool {
        state.withLock { $0.unanswered.contains(Self.key(id)) }
    }

    /// An answer to `id` is about to be written: true once, for the first; false for a second
    /// answer or an answer to an id the host never sent (dropped by the caller).
    func settle(_ id: JSONValue) -> Bool {
        state.withLock { $0.unanswered.remove(Self.key(id)) != nil }
    }

    private static func key(_ id: JSONValue) -> String {
        String(decoding: id.serialized(), as: UTF8.self)
    }
}
