import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process with its stdin and stdout on pipes, or on socket pairs as libuv gives its
/// children (Neovim, Node, VS Code), stderr to a file or inherited; spawned with `posix_spawn`
/// and an empty signal mask.
struct ChildProcess {
    enum Stdio: String { case pipe, socket }

    /// The child's process id.
    let pid: Int32
    /// Write end of the child's stdin.
    let input: Int32
    /// Read end of the child's stdout.
    let output: Int32

    /// Spawns `argv` (argv[0] is the executable path); stderr goes to `stderrPath` when given.
    static func spawn(_ argv: [String], stderrPath: String?, stdio: Stdio = .pipe) -> ChildProcess {
        // [read end, write end] either way (a socket pair's ends are both; the child gets one).
        var inPipe: [Int32] = [0, 0]
        var outPipe: [Int32] = [0, 0]
        switch stdio {
        case .pipe:
            guard pipe(&inPipe) == 0, pipe(&outPipe) == 0 else { die("pipe failed") }
        case .socket:
            let stream = Int32(SOCK_STREAM.rawValue)
            guard socketpair(AF_UNIX, stream, 0, &inPipe) == 0, socketpair(AF_UNIX, stream, 0, &outPipe) == 0 else {
                die("socketpair failed")
            }
        }
        for fd in inPipe + outPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        if let stderrPath {
            posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        let cEnvironment: [UnsafeMutablePointer<CChar>?] =
            ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArguments.forEach { free($0) }
            cEnvironment.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, argv[0], &actions, &attributes, cArguments, cEnvironment)
        guard status == 0 else { die("cannot start \(argv[0]): \(String(cString: strerror(status)))") }
        close(inPipe[0])
        close(outPipe[1])
        return ChildProcess(pid: pid, input: inPipe[1], output: outPipe[0])
    }

    /// Closes stdin, then waits for the child (SIGKILL after `grace` seconds).
    func stop(grace: Double = 10) {
        close(input)
        let deadline = monotonicNanos() + UInt64(grace * 1e9)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if monotonicNanos() > deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                break
            }
            usleep(2_000)
        }
        close(output)
    }

    /// Kills the child at once and reaps it.
    func kill9() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(input)
        close(output)
    }
}

/// Writes all of `bytes` to `fd` (dies on failure).
func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress else { return }
    var offset = 0
    while offset < bytes.count {
        let written = write(fd, base + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            die("write to the child failed: \(String(cString: strerror(errno)))")
        }
        offset += written
    }
}
