import Synchronization

/// Where the process's work runs: the one place that decides it (ARCHITECTURE.md, "Where code
/// runs"). Three kinds of work, three answers:
///
/// - **The process's own tasks** (a command's body, the token manager's flights and its callers'
///   deadlines, logins' steps, discovery fetches, the server's event and prompt tasks) run on
///   ``ownTasks``: the main thread in the command-line binary, which hands it over once, at start
///   (``runOnMainThread(_:)``), so that a start answers its first request and reads or obtains
///   its first token without starting the cooperative pool; the global concurrent executor
///   anywhere else (the library inside another program, the tests).
/// - **A served call that makes a transfer** (`request`, an MCP `tools/call`) runs on the transfer
///   loop of the environment it names once that loop exists (``forTransfer(loop:)``), so its steps
///   and its transfer need no thread hand-off; every other call (a reload, a login, `status`)
///   runs on ``ownTasks``, never on a loop.
/// - **Blocking work** (SQLite and libpq statements, writes to a terminal, a secret command)
///   runs on threads of its own (``SerialThread``, ``SystemThread``), never on an executor.
///
/// Only a preference: the code is the same on any executor, and no job ever blocks the thread it
/// runs on (every wait is a suspension).
public enum Placement {
    /// The main thread's executor, once the binary has handed the main thread over.
    private static let mainThread = Mutex<ThreadExecutor?>(nil)
    /// A place for the own tasks of what is made inside ``withOwnTasks(on:_:)`` (tests).
    @TaskLocal private static var scoped: (any TaskExecutor)?

    /// Where the process's own tasks run (`nil`: the global concurrent executor).
    public static var ownTasks: (any TaskExecutor)? { scoped ?? mainThread.withLock { $0 } }

    /// Runs `body` with `executor` as ``ownTasks`` for what it makes (a token manager keeps the
    /// place it was made with): how a test watches where a component's tasks run without
    /// touching the process's placement.
    package static func withOwnTasks<Value>(on executor: (any TaskExecutor)?, _ body: () throws -> Value) rethrows
        -> Value
    {
        try $scoped.withValue(executor, operation: body)
    }

    /// Where a served call that makes a transfer runs: `loop`, the transfer loop of the
    /// environment it names, once that loop exists; else where the process's own tasks run.
    public static func forTransfer(loop: (any TaskExecutor)?) -> (any TaskExecutor)? {
        loop ?? ownTasks
    }

    /// Where a task is placed: every unstructured task of the product is started through
    /// ``task(_:_:)``, ``throwingTask(_:_:)`` or ``detached(_:_:)`` with one of these (the
    /// architecture check refuses a `Task {}` anywhere else).
    public enum Place: Sendable {
        /// Where the process's own tasks run (``ownTasks``).
        case ownTasks
        /// The cooperative pool (the global concurrent executor), said explicitly: work that must
        /// go on while the process's own place is busy (the main thread runs a command's body),
        /// such as the parent watchdog or a subscription's pump.
        case pool
        /// The executor a component was made with (a token manager keeps the ``ownTasks`` of its
        /// making), or a transfer loop (``forTransfer(loop:)``); `nil`: no preference.
        case executor((any TaskExecutor)?)

        /// The executor preference a task of this place is started with.
        public var preference: (any TaskExecutor)? {
            switch self {
            case .ownTasks: Placement.ownTasks
            case .pool: globalConcurrentExecutor
            case .executor(let executor): executor
            }
        }
    }

    /// Starts an unstructured task at `place` (by default where the process's own tasks run).
    @discardableResult
    public static func task<Success: Sendable>(
        _ place: Place = .ownTasks, _ operation: sending @escaping () async -> Success
    ) -> Task<Success, Never> {
        Task(executorPreference: place.preference, operation: operation)
    }

    /// Starts an unstructured task that may throw at `place`: one piece of work shared by
    /// concurrent callers, who each await its value (and may leave without cancelling it).
    @discardableResult
    public static func throwingTask<Success: Sendable>(
        _ place: Place = .ownTasks, _ operation: sending @escaping () async throws -> Success
    ) -> Task<Success, any Error> {
        Task(executorPreference: place.preference, operation: operation)
    }

    /// Starts a detached task at `place`: it inherits nothing from its starter (priority, task
    /// locals), for work that belongs to no caller (a served request, a subscription's pump, a
    /// login a call asked for).
    @discardableResult
    public static func detached<Success: Sendable>(
        _ place: Place, _ operation: sending @escaping () async -> Success
    ) -> Task<Success, Never> {
        Task.detached(executorPreference: place.preference, operation: operation)
    }

    /// Runs `command` on the calling thread (the main thread, which would otherwise only wait for
    /// it) and makes that thread ``ownTasks`` until it ends; returns what `command` returned.
    /// Called once, by the binary's entry point, before any task starts.
    public static func runOnMainThread(_ command: sending @escaping () async -> Int32) -> Int32 {
        let executor = ThreadExecutor()
        mainThread.withLock { $0 = executor }
        let result = Atomic<Int32>(0)
        Task.detached(executorPreference: executor) {
            result.store(await command(), ordering: .relaxed)
            executor.finish()
        }
        executor.run()
        mainThread.withLock { $0 = nil }  // its jobs no longer run
        return result.load(ordering: .relaxed)
    }
}
