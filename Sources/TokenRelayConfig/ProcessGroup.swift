#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Questions about a process group (the secret commands' groups, ``ProcessCommandRunner``).
enum ProcessGroup {
    /// Whether any process of group `group` is still running. A zombie does not count: it has
    /// ended, and where the system's init does not reap orphans (some containers) it would never go
    /// away. On Linux this reads `/proc`; elsewhere any member, zombie or not, counts.
    static func isRunning(_ group: pid_t) -> Bool {
        guard group > 0 else { return false }
        if kill(-group, 0) != 0 { return errno == EPERM }  // ESRCH: no member at all
        #if os(Linux)
            guard let folder = opendir("/proc") else { return true }
            defer { closedir(folder) }
            while let entry = readdir(folder) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                guard !name.isEmpty, name.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { continue }
                if let (state, processGroup) = status(of: name), processGroup == group, state != "Z", state != "X" {
                    return true
                }
            }
            return false
        #else
            return true
        #endif
    }

    #if os(Linux)
        /// The state letter and process group of process `pid` (from `/proc/PID/stat`:
        /// `pid (comm) state ppid pgrp ...`, where `comm` may itself contain spaces and parentheses).
        private static func status(of pid: String) -> (Character, pid_t)? {
            let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0, let end = buffer[0..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
            let fields = buffer[(end + 1)..<count].split(separator: UInt8(ascii: " "))
            guard fields.count >= 3, let state = fields[0].first,
                let group = pid_t(String(decoding: fields[2], as: UTF8.self))
            else { return nil }
            return (Character(Unicode.Scalar(state)), group)
        }
    #endif
}
