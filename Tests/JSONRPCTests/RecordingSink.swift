import Synchronization

@testable import TokenRelayJSONRPC

/// A sink that records every message and lets tests wait for a number of them.
final class RecordingSink: MessageSink {
    private struct State {
        var messages: [JSONValue] = []
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    func send(_ message: consuming [UInt8]) async { record(message) }
    func sendNow(_ message: consuming [UInt8]) { record(message) }

    private func record(_ message: [UInt8]) {
        let value = (try? JSONParser.parse(message)) ?? .string("<unparseable>")
        let ready: [CheckedContinuation<Void, Never>] = state.withLock { state in
            state.messages.append(value)
            let count = state.messages.count
            let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    var messages: [JSONValue] { state.withLock { $0.messages } }

    /// Waits until at least `count` messages were recorded.
    func waitFor(_ count: Int) async -> [JSONValue] {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { state in
                if state.messages.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
        return messages
    }
}

/// A gate that handlers wait on until the test opens it; counts the waiters.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiting: [CheckedContinuation<Void, Never>] = []
        var arrived = 0
        var arrivalWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    func pass() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (resumeNow, ready): (Bool, [CheckedContinuation<Void, Never>]) = state.withLock { state in
                state.arrived += 1
                let ready = state.arrivalWaiters.filter { $0.count <= state.arrived }.map(\.continuation)
                state.arrivalWaiters.removeAll { $0.count <= state.arrived }
                if state.open { return (true, ready) }
                state.waiting.append(continuation)
                return (false, ready)
            }
            for waiter in ready { waiter.resume() }
            if resumeNow { continuation.resume() }
        }
    }

    /// Waits until `count` callers have reached the gate.
    func waitForArrivals(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { state in
                if state.arrived >= count { return true }
                state.arrivalWaiters.append((count, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    var arrivedCount: Int { state.withLock { $0.arrived } }

    func open() {
        let waiting = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }
}

extension RPCError {
    /// The error mapper the dispatcher tests use (the relay's is `ErrorMapping.rpcError`): wire
    /// errors as thrown, cancellation as -32800, anything else internal.
    @Sendable static func testMapper(_ error: any Error) -> RPCError {
        if let error = error as? RPCError { return error }
        if error is CancellationError { return .cancelled }
        return RPCError(code: .internalError, message: "x")
    }
}
