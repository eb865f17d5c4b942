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
        var running = false
        var ownerGone = false
    }

    /// What the thread shares with its owner; the thread holds it until its last job ran.
    private final class Core: Sendable {
        let state = Mutex(State())
        let wakeup = DispatchSemaphore(value: 0)
    }

    private let name: String
    private let core = Core()

    /// A thread named `name` (``ThreadName``), not started yet.
    public init(named name: String) {
        self.name = name
    }

    deinit {
        let running = core.state.withLock { state in
            state.ownerGone = true
            return state.running
        }
        if running { core.wakeup.signal() }
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
    /// thread (resource limits), the jobs waiting run on the caller's thread instead.
    public func async(_ job: @escaping @Sendable () -> Void) {
        let launch = core.state.withLock { state in
            state.jobs.append(job)
            defer { state.running = true }
            return !state.running
        }
        if launch { self.launch() }
        core.wakeup.signal()
    }

    private func launch() {
        let core = self.core
        let started = SystemThread.start(named: name) {
            while true {
                core.wakeup.wait()
                let (jobs, ownerGone) = core.state.withLock { state in
                    defer { state.jobs.removeAll() }
                    return (state.jobs, state.ownerGone)
                }
                for job in jobs { job() }
                // Nobody can give a job once the owner is gone: the last wake-up ends the thread.
                if ownerGone { return }
            }
        }
        guard !started else { return }
        let jobs = core.state.withLock { state in
            defer {
                state.jobs.removeAll()
                state.running = false
            }
            return state.jobs
        }
        for job in jobs { job() }
    }
}
