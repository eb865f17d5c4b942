import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A thread of its own that runs the jobs given to it one at a time, in the order given: for work
/// that may block (an SQLite statement waiting for another process's lock) and so must stay off
/// the cooperative pool. The thread starts with ``start()`` or the first job and ends once its
/// owner is gone and every job given has run.
///
/// Unlike a serial `DispatchQueue`, whose worker thread libdispatch creates when work arrives,
/// the thread exists from ``start()`` on. That matters while a library loads: glibc creates no
/// thread while a `dlopen` maps and relocates a library (it holds its TLS lock throughout), so
/// work that is to run beside libcurl's load (milliseconds) needs its thread before that load
/// begins.
public final class SerialThread: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        /// The jobs have a runner: the thread, or (when the system refused a thread) the caller
        /// that is running them inline.
        var running = false
        /// The thread was started (set before `pthread_create`, so that no job given meanwhile
        /// goes without a wake-up; cleared if the system refuses it).
        var threadExists = false
        var ownerGone = false
    }

    private enum Action { case none, wake, launch }

    /// What the thread shares with its owner; the thread holds it until its last job ran.
    private final class Core: Sendable {
        let state = Mutex(State())
        let wakeup = DispatchSemaphore(value: 0)
    }

    /// What the thread reports of its own life (tests wait on these instead of polling).
    struct Observer: Sendable {
        var started: @Sendable () -> Void = {}
        var ended: @Sendable () -> Void = {}
    }

    private let name: String
    private let core = Core()
    private let observer: Observer

    /// A thread named `name` (``ThreadName``), not started yet.
    public convenience init(named name: String) {
        self.init(named: name, observer: Observer())
    }

    init(named name: String, observer: Observer) {
        self.name = name
        self.observer = observer
    }

    deinit {
        let wake = core.state.withLock { state in
            state.ownerGone = true
            return state.threadExists
        }
        if wake { core.wakeup.signal() }
    }

    /// Starts the thread now if it is not running yet.
    public func start() {
        let launch = core.state.withLock { state in
            defer { state.running = true }
            return !state.running
        }
        if launch { self.launch() }
    }

    /// Runs `job` on the thread after every job given before it. When the system refuses a
    /// thread (resource limits), the jobs run on the caller's thread instead, still one at a time
    /// and in order.
    public func async(_ job: @escaping @Sendable () -> Void) {
        let action = core.state.withLock { state -> Action in
            state.jobs.append(job)
            if state.running { return state.threadExists ? .wake : .none }
            state.running = true
            return .launch
        }
        switch action {
        case .none: break
        case .wake: core.wakeup.signal()
        case .launch: launch()
        }
    }

    /// Starts the thread; when the system refuses it, runs the jobs here until none is left.
    private func launch() {
        let core = self.core
        let observer = self.observer
        core.state.withLock { $0.threadExists = true }
        let started = SystemThread.start(named: name) {
            observer.started()
            defer { observer.ended() }
            while true {
                let (jobs, ownerGone) = core.state.withLock { state in
                    defer { state.jobs.removeAll() }
                    return (state.jobs, state.ownerGone)
                }
                if jobs.isEmpty {
                    // Nobody gives a job once the owner is gone: nothing is left to wait for.
                    if ownerGone { return }
                    core.wakeup.wait()
                    continue
                }
                for job in jobs { job() }
            }
        }
        guard !started else { return }
        core.state.withLock { $0.threadExists = false }
        while true {
            let jobs = core.state.withLock { state -> [@Sendable () -> Void] in
                defer { state.jobs.removeAll() }
                if state.jobs.isEmpty { state.running = false }
                return state.jobs
            }
            if jobs.isEmpty { return }
            for job in jobs { job() }
        }
    }
}
