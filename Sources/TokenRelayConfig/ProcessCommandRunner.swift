import FoundationEssentials
import Synchronization
import TokenRelayLogging
import TokenRelayPlatform

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a secret command failed. Never carries the command's standard output.
public enum SecretCommandError: Error, Sendable, CustomStringConvertible {
    /// The argv list is empty.
    case emptyCommand
    /// `argv[0]` was not found on `PATH` (or is not executable).
    case notFound(command: String)
    /// `posix_spawn` failed.
    case spawnFailed(command: String, reason: String)
    /// The command ran past its time limit; its process group was ended.
    case timedOut(command: String, limit: Duration)
    /// The command exited non-zero or was killed by a signal; `stderr` is redacted and bounded.
    case failed(command: String, status: String, stderr: String)
    /// The command printed more than the allowed amount.
    case outputTooLarge(command: String, limit: Int)
    /// The calling task was cancelled; the command's process group was ended.
    case cancelled(command: String)

    public var description: String {
        switch self {
        case .emptyCommand: return "the secret command is empty"
        case .notFound(let command): return "secret command \(command) was not found on PATH or is not executable"
        case .spawnFailed(let command, let reason): return "secret command \(command) could not start: \(reason)"
        case .timedOut(let command, let limit):
            return "secret command \(command) did not finish within \(limit) and was killed"
        case .failed(let command, let status, let stderr):
            return "secret command \(command) \(status)" + (stderr.isEmpty ? "" : "; its stderr said: \(stderr)")
        case .outputTooLarge(let command, let limit):
            return "secret command \(command) printed more than \(limit) bytes"
        case .cancelled(let command): return "secret command \(command) was cancelled and killed"
        }
    }
}

/// Runs a secret command and returns its standard output.
public protocol SecretCommandRunner: Sendable {
    /// Runs `argv` (argv[0] looked up on `environment["PATH"]`) with `environment`, stdin from
    /// /dev/null, and returns its stdout once it exits 0 within `timeout`.
    func run(argv: [String], environment: [String: String], timeout: Duration) async throws(SecretCommandError)
        -> [UInt8]
}

/// Runs commands with `posix_spawn`: no shell, an empty signal mask and default signal
/// dispositions in the child (the parent may block or ignore signals), stdin `/dev/null`,
/// stdout and stderr captured through pipes. Each command runs in a process group of its own;
/// when the time limit passes, the output is too large or the calling task is cancelled, the
/// whole group is ended (SIGTERM, then SIGKILL after ``terminationGrace``) and the run returns
/// only once no process of the group is left running, so nothing a command started outlives it.
/// The blocking wait happens on its own thread, never on the cooperative pool.
public struct ProcessCommandRunner: SecretCommandRunner {
    /// The most stdout accepted (1 MiB).
    public static let maxOutputBytes = 1024 * 1024
    /// How much stderr is kept for the error message.
    public static let maxErrorBytes = 512

    /// How long an ended command's group has between SIGTERM and SIGKILL.
    public let terminationGrace: Duration

    public init(terminationGrace: Duration = .seconds(1)) {
        self.terminationGrace = terminationGrace
    }

    public func run(argv: [String], environment: [String: String], timeout: Duration) async throws(SecretCommandError)
        -> [UInt8]
    {
        guard let command = argv.first, !command.isEmpty else { throw .emptyCommand }
        guard let executable = Self.locate(command, path: environment["PATH"]) else {
            throw .notFound(command: command)
        }
        let child = ChildProcess(
            executable: executable, argv: argv, environment: environment, timeout: timeout, grace: terminationGrace)
        let result: Result<[UInt8], SecretCommandError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let started = SystemThread.start(named: "relay-command") {
                    continuation.resume(returning: child.runToCompletion())
                }
                if !started {
                    continuation.resume(
                        returning: .failure(.spawnFailed(command: command, reason: "no thread to run it")))
                }
            }
        } onCancel: {
            child.cancel()
        }
        return try result.get()
    }

    /// The executable for `command`: as given when it contains a `/`, else the first
    /// executable match in the `PATH` folders.
    static func locate(_ command: String, path: String?) -> String? {
        if command.contains("/") { return access(command, X_OK) == 0 ? command : nil }
        let folders = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false)
        for folder in folders {
            let candidate = (folder.isEmpty ? "." : String(folder)) + "/" + command
            var info = stat()
            if stat(candidate, &info) == 0, (UInt32(info.st_mode) & UInt32(S_IFMT)) == UInt32(S_IFREG),
                access(candidate, X_OK) == 0
            {
                return candidate
            }
        }
        return nil
    }
}

/// One run of one command. `state` is the only shared state (the pid and whether the task was
/// cancelled); everything else is touched only by the thread in `runToCompletion`.
private final class ChildProcess: Sendable {
    let executable: String
    let argv: [String]
    let environment: [String: String]
    let timeout: Duration
    let grace: Duration
    /// Guarded by the mutex: the running child's pid (0 before spawn / after reaping; it is also
    /// the id of the child's process group) and whether cancellation was requested.
    let state = Mutex<(pid: pid_t, cancelled: Bool)>((0, false))

    init(executable: String, argv: [String], environment: [String: String], timeout: Duration, grace: Duration) {
        self.executable = executable
        self.argv = argv
        self.environment = environment
        self.timeout = timeout
        self.grace = grace
    }

    var name: String { argv.first ?? executable }

    /// Asks the command's group to stop now (SIGTERM); the running thread notices the flag
    /// within 100 ms and ends the group for good (``endGroup(_:)``).
    func cancel() {
        state.withLock { state in
            state.cancelled = true
            // The child is not reaped yet, so its pid still names its group.
            if state.pid > 0 { kill(-state.pid, SIGTERM) }
        }
    }

    private var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Spawns, collects output until both pipes close or the deadline passes, reaps.
    func runToCompletion() -> Result<[UInt8], SecretCommandError> {
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard Self.makePipe(&outPipe) else { return .failure(.spawnFailed(command: name, reason: Self.errorText())) }
        guard Self.makePipe(&errPipe) else {
            close(outPipe[0]); close(outPipe[1])
            return .failure(.spawnFailed(command: name, reason: Self.errorText()))
        }
        let spawned = spawn(stdoutWrite: outPipe[1], stderrWrite: errPipe[1])
        close(outPipe[1])
        close(errPipe[1])
        defer { close(outPipe[0]); close(errPipe[0]) }
        let pid: pid_t
        switch spawned {
        case .failure(let error): return .failure(error)
        case .success(let value): pid = value
        }
        state.withLock { $0.pid = pid }

        let deadline = ContinuousClock.now.advanced(by: timeout)
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var open = [outPipe[0], errPipe[0]]
        var timedOut = false
        var tooLarge = false
        var cancelled = false
        var buffer = [UInt8](repeating: 0, count: 16384)
        var exited: Int32?
        while !open.isEmpty {
            if isCancelled {
                cancelled = true
                break
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            if remaining <= .zero {
                timedOut = true
                break
            }
            // Wake at least every 100 ms: a child that exited while a grandchild still holds its
            // pipes open (an agent it started) must not look like a hang.
            let slice = exited == nil ? min(remaining, .milliseconds(100)) : .zero
            let milliseconds =
                exited == nil
                ? Int32(
                    clamping: slice.components.seconds * 1000 + slice.components.attoseconds / 1_000_000_000_000_000 + 1
                )
                : 0
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), milliseconds)
            if ready < 0 {
                if errno == EINTR { continue } else { break }
            }
            if ready == 0 {
                // Quiet pipes: if the child has exited, one last zero-timeout pass picks up
                // anything it wrote just before exiting.
                if exited != nil { break }
                exited = tryReap(pid)
                continue
            }
            for entry in fds where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count <= 0 {
                    if count < 0, errno == EINTR || errno == EAGAIN { continue }
                    open.removeAll { $0 == entry.fd }
                } else if entry.fd == outPipe[0] {
                    stdout.append(contentsOf: buffer[0..<count])
                    if stdout.count > ProcessCommandRunner.maxOutputBytes { tooLarge = true }
                } else if stderr.count < 4 * ProcessCommandRunner.maxErrorBytes {
                    stderr.append(contentsOf: buffer[0..<count])
                }
            }
            if tooLarge { break }
        }
        if timedOut || tooLarge || cancelled {
            // Ended by us: the whole group goes, even when the child itself has exited already
            // and only what it started is left (holding the pipes, or writing past the limit).
            endGroup(pid)
            if cancelled || isCancelled { return .failure(.cancelled(command: name)) }
            if timedOut { return .failure(.timedOut(command: name, limit: timeout)) }
            return .failure(.outputTooLarge(command: name, limit: ProcessCommandRunner.maxOutputBytes))
        }
        let status = exited ?? reap(pid, deadline: deadline)
        if isCancelled { return .failure(.cancelled(command: name)) }
        guard let status else { return .failure(.timedOut(command: name, limit: timeout)) }
        let code = status
        let signal = code & 0x7f
        let exitStatus = (code >> 8) & 0xff
        if signal == 0 && exitStatus == 0 { return .success(stdout) }
        let statusText = signal == 0 ? "exited with status \(exitStatus)" : "was killed by signal \(signal)"
        return .failure(.failed(command: name, status: statusText, stderr: Self.summarise(stderr)))
    }

    /// Waits for the child; ends its group if it is still running past the deadline (or the
    /// task is cancelled meanwhile). Returns the raw wait status, or `nil` when the group had to
    /// be ended.
    private func reap(_ pid: pid_t, deadline: ContinuousClock.Instant) -> Int32? {
        while true {
            if let status = tryReap(pid) { return status }
            if ContinuousClock.now >= deadline || isCancelled {
                endGroup(pid)
                return nil
            }
            // The child closed its pipes but has not exited yet: wait a little.
            _ = poll(nil, 0, 5)
        }
    }

    /// Ends process group `group` (the child's pid) and reaps the child: SIGTERM (and SIGCONT, so
    /// a stopped member can act on it) to the group and to the child itself (should it have left
    /// the group), up to ``grace`` for every member to stop and the child to be reaped, then
    /// SIGKILL. Returns once no member is left running and the child is reaped (bounded, in case a
    /// member is stuck in the kernel: a child still unreaped then is reaped by a thread of its own,
    /// so no path leaves a zombie behind).
    private func endGroup(_ group: pid_t) {
        signalChild(group, SIGTERM)
        kill(-group, SIGTERM)
        kill(-group, SIGCONT)
        if !waitForGroup(group, within: grace) {
            signalChild(group, SIGKILL)
            kill(-group, SIGKILL)
            if !waitForGroup(group, within: .seconds(5)) { reapLater(group) }
        }
    }

    /// Polls until the child is reaped and no process of `group` is running; `false` when `limit`
    /// passed first. Both are needed: the group is "not running" as soon as its members are
    /// zombies, before the child (one of them) has been waited for.
    private func waitForGroup(_ group: pid_t, within limit: Duration) -> Bool {
        let end = ContinuousClock.now.advanced(by: limit)
        while true {
            _ = tryReap(group)
            if isReaped, !ProcessGroup.isRunning(group) { return true }
            if ContinuousClock.now >= end { return false }
            _ = poll(nil, 0, 5)
        }
    }

    /// Whether the child has been reaped (or never started).
    private var isReaped: Bool { state.withLock { $0.pid == 0 } }

    /// Sends `signal` to the child itself while it is not reaped (its pid cannot name another
    /// process until then).
    private func signalChild(_ pid: pid_t, _ signal: Int32) {
        state.withLock { state in
            if state.pid == pid { kill(pid, signal) }
        }
    }

    /// Hands a SIGKILLed child that has not died yet (stuck in the kernel) to a thread that waits
    /// for it, so it is reaped whenever it dies; the run does not wait for it.
    private func reapLater(_ pid: pid_t) {
        let owned = state.withLock { state -> Bool in
            guard state.pid == pid else { return false }
            state.pid = 0
            return true
        }
        guard owned else { return }
        log.warn("secret command \(name) (pid \(pid)) did not die after SIGKILL; it is reaped when it does")
        let started = SystemThread.start(named: "relay-reap") {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        if !started { log.warn("no thread to reap secret command \(name) (pid \(pid)): it may stay a zombie") }
    }

    /// Reaps the child if it has exited, returning its raw wait status. Done under the lock that
    /// guards the pid, so `cancel()` can never signal a pid the system has already reused.
    private func tryReap(_ pid: pid_t) -> Int32? {
        state.withLock { state -> Int32? in
            guard state.pid == pid else { return nil }
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, WNOHANG) } while result < 0 && errno == EINTR
            guard result == pid || result < 0 else { return nil }
            state.pid = 0
            return result == pid ? status : Int32(255 << 8)
        }
    }

    /// Spawns the child with stdin `/dev/null`, stdout/stderr on the pipes, an empty signal
    /// mask and every signal at its default disposition.
    private func spawn(stdoutWrite: Int32, stderrWrite: Int32) -> Result<pid_t, SecretCommandError> {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutWrite, 1)
        posix_spawn_file_actions_adddup2(&actions, stderrWrite, 2)
        if let closeFrom = Self.addCloseFrom() {
            // Descriptors the parent opened without O_CLOEXEC (sockets, pipes) do not leak.
            _ = closeFrom(&actions, 3)
        }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        // A process group of its own (id = the child's pid): it and everything it starts can be
        // ended together.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let arguments = argv.map { strdup($0) } + [nil]
        let variables = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            arguments.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, &actions, &attributes, arguments, variables)
        guard code == 0 else { return .failure(.spawnFailed(command: name, reason: String(cString: strerror(code)))) }
        return .success(pid)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), looked up at run time because
    /// the Glibc module does not export GNU extensions. `nil` where it does not exist.
    private static func addCloseFrom() -> AddCloseFrom? {
        // RTLD_DEFAULT is the null handle on glibc.
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

    /// Redacted, bounded, single-line stderr for an error message.
    private static func summarise(_ bytes: [UInt8]) -> String {
        let text = Redactor.shared.redact(String(decoding: bytes, as: UTF8.self))
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " | ")
        guard line.utf8.count > ProcessCommandRunner.maxErrorBytes else { return line }
        return ServerText.prefix(line, maximumBytes: ProcessCommandRunner.maxErrorBytes) + "…"
    }

    /// A pipe whose both ends close on exec (the child gets its copies through dup2).
    private static func makePipe(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
