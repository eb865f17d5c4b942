import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An investigation aid, off unless `TOKENRELAY_TEST_POOL_WATCHDOG` names a file: a thread of its
/// own that asks the cooperative pool to run a tiny task every 250 ms and, when one has not
/// started within 2 s (every pool thread busy or blocked), appends every thread's backtrace
/// (`gdb -batch -p PID`) to that file, once per stall. It shows what holds the pool when a test
/// that needs it (a callback resumed on it) stalls under load.
public enum PoolWatchdog {
    private static let started = Mutex(false)

    /// Starts the watchdog once per process when the variable is set; otherwise does nothing.
    public static func startIfRequested() {
        guard let path = ProcessInfo.processInfo.environment["TOKENRELAY_TEST_POOL_WATCHDOG"], !path.isEmpty,
            started.withLock({ was in
                defer { was = true }
                return !was
            })
        else { return }
        Thread {
            let ran = Flag()
            var stalled = false
            while true {
                ran.value.store(false, ordering: .relaxed)
                let asked = ContinuousClock.now
                Task.detached { ran.value.store(true, ordering: .relaxed) }
                while !ran.value.load(ordering: .relaxed), ContinuousClock.now - asked < .seconds(2) {
                    usleep(10_000)
                }
                if !ran.value.load(ordering: .relaxed) {
                    if !stalled { dump(to: path) }
                    stalled = true
                } else {
                    stalled = false
                }
                usleep(250_000)
            }
        }.start()
    }

    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    private static func dump(to path: String) {
        let pid = getpid()
        let header = "== \(Date()) the cooperative pool ran no task for 2 s (pid \(pid))\n"
        if let handle = FileHandle(forWritingAtPath: path)
            ?? {
                _ = FileManager.default.createFile(atPath: path, contents: nil)
                return FileHandle(forWritingAtPath: path)
            }()
        {
            handle.seekToEndOfFile()
            handle.write(Data(header.utf8))
            try? handle.close()
        }
        guard let gdb = ["/usr/bin/gdb"].first(where: FileManager.default.isExecutableFile(atPath:)) else { return }
        let command = "\(gdb) -batch -p \(pid) -ex 'thread apply all bt 30' >> '\(path)' 2>&1"
        _ = try? ChildProcess(
            "/bin/sh", ["-c", command], environment: ProcessInfo.processInfo.environment, stdout: .null,
            stderr: .null)
    }
}
