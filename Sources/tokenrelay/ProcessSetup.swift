import CSystem
import Dispatch
import FoundationEssentials
import Glibc
import TokenRelayLogging

/// Process-wide setup done once at start.
enum ProcessSetup {
    /// Unblocks every signal the process inherited blocked (a parent written in Swift often
    /// spawns children with SIGTERM/SIGINT/SIGHUP blocked) and ignores SIGPIPE, so a closed
    /// stdout is an `EPIPE` error rather than a silent death.
    static func resetSignals() {
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_UNBLOCK, &all, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Makes every thread allocate from one malloc arena. glibc gives each new thread's first
    /// allocation an arena of its own (128 MiB of address space reserved and trimmed, page faults
    /// on first use, and TLB shoot-downs of the other running threads): every command starts
    /// several threads before its first answer, each allocating a little. One arena makes every
    /// start cheaper and costs nothing measurable at 64 in flight (scripts/bench.d/FINDINGS.md).
    /// Call before any thread starts.
    static func useOneMallocArena() {
        _ = mallopt(M_ARENA_MAX, 1)
    }

    /// Protects stdout: frames go to a duplicate of the real stdout, and fd 1 is pointed at
    /// stderr so that nothing else (a stray `print`, a library) can corrupt the stream.
    /// Returns the protocol file descriptor.
    static func protectStandardOutput() -> Int32 {
        let protocolOutput = dup(STDOUT_FILENO)
        guard protocolOutput >= 0 else { return STDOUT_FILENO }
        _ = fcntl(protocolOutput, F_SETFD, FD_CLOEXEC)
        dup2(STDERR_FILENO, STDOUT_FILENO)
        return protocolOutput
    }

    /// Signals that stop `serve` cleanly (stop reading, drain in-flight requests, exit 0) and end
    /// the one-shot commands.
    static let stopping: [Int32] = [SIGTERM, SIGINT, SIGQUIT]
    /// Signals `serve` answers with a configuration reload (SPEC §5.7); the one-shot commands
    /// end on them as on SIGTERM (``CommandLineTool/interruptible(_:)``: `call` still
    /// dies by the signal, as curl does, once a token request it already sent is committed).
    static let reloading: [Int32] = [SIGHUP]

    /// Ends the process by signal `number` (its default action), after flushing the log and
    /// stdio: how a one-shot command that was interrupted exits, so its parent sees the signal.
    /// Returns only if the signal did not end the process.
    static func end(bySignal number: Int32) {
        log.flush()
        fflush(nil)
        signal(number, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(number)
    }

    /// The conventional name of a signal, for log lines.
    static func name(of number: Int32) -> String {
        switch number {
        case SIGHUP: "SIGHUP"
        case SIGINT: "SIGINT"
        case SIGQUIT: "SIGQUIT"
        case SIGTERM: "SIGTERM"
        default: "signal \(number)"
        }
    }

    /// Calls `handler` on a dispatch queue for each delivery of `signals`, from the moment this
    /// returns; the returned sources must be kept alive. Returns once libdispatch has registered
    /// every source (it takes the signals over then; at most 5 s, which only a broken libdispatch
    /// would need): until that moment a signal keeps its default action. Switching the default action off first (`SIG_IGN`, as before) discarded a
    /// signal that came in between — a `serve` that had already answered a request then ignored
    /// a SIGTERM (under load, about 1 run in 10 of `sigtermFromAThreadThatBlocksItStill…`).
    static func onSignals(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void)
        -> [any DispatchSourceSignal]
    {
        let registered = DispatchSemaphore(value: 0)
        let sources = signals.map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            return source
        }
        let deadline = DispatchTime.now() + .seconds(5)
        for _ in sources {
            guard registered.wait(timeout: deadline) == .success else { break }
        }
        return sources
    }
}
