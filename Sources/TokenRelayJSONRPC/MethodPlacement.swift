import TokenRelayPlatform

/// The running transfer loops a served call may run on (the server's runtime).
public protocol TransferLoops: Sendable {
    /// The running transfer loop of environment `name` (`nil`: the default environment), if any.
    func loop(forEnvironment name: String?) -> (any TaskExecutor)?
}

/// Where each method's requests run: the server's placement (``Placement``), given to the
/// ``Dispatcher`` as data. Each method type says its place beside its name.
public struct MethodPlacement: Sendable {
    /// Where a method's requests run.
    public enum Place: Sendable, Equatable {
        /// Where the process's own tasks run, never on a transfer loop (a reload, a login,
        /// `status`...).
        case ownTasks
        /// A call that makes a transfer: on the transfer loop of the environment its params name
        /// at `environmentAt` (the default environment when absent), once that loop runs, so its
        /// steps and its transfer need no thread hand-off; before that, where own tasks run.
        case transfer(environmentAt: [String])
    }

    /// The methods that do not run where own tasks run.
    public let places: [String: Place]
    /// The loops a `transfer` method runs on.
    let loops: (any TransferLoops)?

    public init(_ places: [String: Place] = [:], loops: (any TransferLoops)? = nil) {
        self.places = places
        self.loops = loops
    }

    /// The executor `request`'s task prefers. A scheduling choice only: a call that names no
    /// valid environment fails in its handler, wherever it runs.
    public func executor(for request: RPCRequest) -> (any TaskExecutor)? {
        guard case .transfer(let pointer)? = places[request.method], let loops else { return Placement.ownTasks }
        var named = request.params
        for member in pointer { named = named?[member] }
        return Placement.forTransfer(loop: loops.loop(forEnvironment: named?.stringValue))
    }
}
