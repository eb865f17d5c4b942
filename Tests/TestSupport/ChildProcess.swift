import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A process a test starts: `posix_spawn` with the descriptors the test gives for 0, 1 and 2 and
/// no other (every descriptor from 3 up is closed in the child), an empty signal mask and every
/// signal at its default disposition (as a shell starts a program: nothing of the test process's
/// ignored SIGPIPE or blocked SIGTERM is inherited), in the test process's process group (a ^C
/// at a terminal reaches it too), reaped by a thread of its own.
///
/// Not Foundation's `Process`: its `run()` reads past a heap buffer while it looks for the
/// highest open descriptor (AddressSanitizer: `findMaximumOpenFromProcSelfFD`), which crashed a
/// test binary under `--parallel`.
public final class ChildProcess: Sendable {
    /// How the child ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
        /// The wait itself failed (`errno`): the child was reaped by someone else.
        case unknown(errno: Int32)

        /// The exit code, or the signal's number (as Foundation's `terminationStatus`).
        public var status: Int32 {
            switch self {
            case .exited(let code), .signalled(let code): code
            case .unknown: -1
            }
        }
    }

    /// What one of the child's standard descriptors is.
    public enum Stdio: Sendable {
        /// The test process's own descriptor of that number.
        case inherit
        /// `/dev/null`.
        case null
        /// A descriptor of the test's (the child gets a copy; the test still owns and closes it).
        case descriptor(Int32)
    }

    /// `posix_spawn` failed.
    public struct SpawnFailed: Error, CustomStringConvertible {
        public let description: String
    }

    /// The child outlived the timeout; it was killed and reaped.
    public struct TimedOut: Error, CustomStringConvertible {
        public let description: String
    }

    private struct State {
        /// Set when the child is reaped: its pid may be another process's from then on.
        var reaped = false
        /// Set once `onExit` has run.
        var termination: Termination?
        var waiters: [CheckedContinuation<Termination, Never>] = []
    }

    /// The child's process id (not reused by the system before ``termination`` is set).
    public let pid: Int32
    private let executable: String
    private let state = Mutex(State())

    /// Starts `executable` with `arguments` (argv[1...]) and `environment`, its home and XDG
    /// folders private unless the test set them (``TestScratch/isolatingHome(_:)``); in
    /// `directory` when given. `onExit` runs on the reaper thread once the child is reaped,
    /// before any ``wait()`` returns.
    public init(
        _ executable: String, _ arguments: [String] = [], environment: [String: String],
        directory: String? = nil, stdin: Stdio = .null, stdout: Stdio = .inherit, stderr: Stdio = .inherit,
        onExit: (@Sendable (Termination) -> Void)? = nil
    ) throws {
        self.executable = executable
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        for (number, stdio) in [(Int32(0), stdin), (1, stdout), (2, stderr)] {
            switch stdio {
            case .inherit: break
            case .null:
                posix_spawn_file_actions_addopen(&actions, number, "/dev/null", number == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, number)
            }
        }
        guard let closeFrom = GNUSpawn.addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw SpawnFailed(description: "posix_spawn_file_actions_addclosefrom_np is not available")
        }
        if let directory {
            guard let addChdir = GNUSpawn.addChdir, addChdir(&actions, directory) == 0 else {
                throw SpawnFailed(description: "posix_spawn_file_actions_addchdir_np is not available")
            }
        }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        // Never the user's home: a shell, editor, browser or tool writes its folders there.
        let envp =
            TestScratch.isolatingHome(environment).sorted { $0.key < $1.key }.map {
                strdup("\($0.key)=\($0.value)")
            } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard code == 0 else {
            throw SpawnFailed(description: "cannot start \(executable): \(String(cString: strerror(code)))")
        }
        self.pid = pid
        // The thread keeps this object alive until the child is reaped.
        Thread { [self] in
            let termination = reap()
            onExit?(termination)
            let waiters = state.withLock { state in
                state.termination = termination
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: termination) }
        }.start()
    }

    /// Waits for the child to end (without reaping it, so its pid stays valid for ``signal(_:)``
    /// meanwhile), then reaps it under the lock ``signal(_:)`` takes. How it ended.
    private func reap() -> Termination {
        var info = siginfo_t()
        var result: Int32
        repeat { result = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) } while result < 0 && errno == EINTR
        return state.withLock { state in
            state.reaped = true
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, 0) } while reaped < 0 && errno == EINTR
            guard reaped == pid else { return .unknown(errno: errno) }
            // <sys/wait.h>'s WIFEXITED/WEXITSTATUS/WTERMSIG, which Swift does not import.
            return status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
        }
    }

    /// How the child ended; `nil` while it runs.
    public var termination: Termination? { state.withLock { $0.termination } }

    /// Whether the child has not been reaped yet.
    public var isRunning: Bool { state.withLock { !$0.reaped } }

    /// Sends `number` to the child unless it has already been reaped (its pid may be another
    /// process's by then). Whether it was sent.
    @discardableResult
    public func signal(_ number: Int32) -> Bool {
        state.withLock { state in
            guard !state.reaped else { return false }
            return kill(pid, number) == 0
        }
    }

    /// How the child ended, once it has.
    public func wait() async -> Termination {
        await withCheckedContinuation { (continuation: CheckedContinuation<Termination, Never>) in
            let ended: Termination? = state.withLock { state in
                if let termination = state.termination { return termination }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// How the child ended; past `timeout` it is killed, reaped, and ``TimedOut`` thrown.
    public func wait(timeout: Duration) async throws -> Termination {
        let killed = Atomic<Bool>(false)
        let timer = Task { [self] in
            try await Task.sleep(for: timeout)
            if signal(SIGKILL) { killed.store(true, ordering: .sequentiallyConsistent) }
        }
        let termination = await wait()
        timer.cancel()
        _ = await timer.result
        // A child that had already exited when the timer fired (a zombie takes the signal) did
        // not time out.
        if killed.load(ordering: .sequentiallyConsistent), termination == .signalled(SIGKILL) {
            throw TimedOut(description: "\(executable) timed out after \(timeout)")
        }
        return termination
    }

    /// A close-on-exec pipe: (read end, write end). Made close-on-exec atomically (`pipe2`), so
    /// a child another test spawns at the same moment cannot inherit it and hold it open.
    public static func makePipe(flags: Int32 = 0) throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard let pipe2 = GNUSpawn.pipe2, pipe2(&fds, O_CLOEXEC | flags) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        return (fds[0], fds[1])
    }

    /// `count` pipes (see ``makePipe(flags:)``), or none: those made before a failure are closed.
    public static func makePipes(_ count: Int) throws -> [(read: Int32, write: Int32)] {
        var pipes: [(read: Int32, write: Int32)] = []
        do {
            for _ in 0..<count { pipes.append(try makePipe()) }
        } catch {
            for pipe in pipes {
                close(pipe.read)
                close(pipe.write)
            }
            throw error
        }
        return pipes
    }
}

/// glibc's `pipe2` and spawn extensions (2.34 and 2.29), looked up at run time: the Glibc module
/// does not export GNU extensions.
private enum GNUSpawn {
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    typealias AddChdir =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) ->
        Int32

    static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }
    static let pipe2: Pipe2? = dlsym(nil, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }
    static let addChdir: AddChdir? = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map {
        unsafeBitCast($0, to: AddChdir.self)
    }
}
