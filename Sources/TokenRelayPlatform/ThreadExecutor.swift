import Dispatch
import Synchronization

/// A task executor whose jobs run, one at a time and in the order given, on the thread that calls
/// ``run()``: the main thread, which would otherwise only wait for the command to end. A command
/// and the requests that need no HTTP loop then run without the cooperative pool: its first
/// thread, which libdispatch starts when the first job arrives, was on every start's way to the
/// first answer.
///
/// Jobs given after ``finish()`` do not run: the process ends once `run()` returns.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var finished = false
    }

    private let state = Mutex(State())
    /// Signalled once per job and once by `finish()`: `run()` never sleeps while one waits.
    private let wakeup = DispatchSemaphore(value: 0)

    public init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        state.withLock { $0.jobs.append(job) }
        wakeup.signal()
    }

    /// Makes ``run()`` return once the jobs it holds now have run.
    public func finish() {
        state.withLock { $0.finished = true }
        wakeup.signal()
    }

    /// Runs jobs on the calling thread until ``finish()``.
    public func run() {
        var jobs: [UnownedJob] = []
        while true {
            wakeup.wait()
            let finished = state.withLock { state in
                swap(&jobs, &state.jobs)
                return state.finished
            }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
            jobs.removeAll(keepingCapacity: true)
            if finished { return }
        }
    }
}
