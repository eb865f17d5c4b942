import Glibc

/// The test process's own threads, by the names tokenrelay gives them (`/proc/self/task/*/comm`).
public enum ProcessThreads {
    /// How many threads of this process are named `name` now.
    public static func count(named name: String) -> Int {
        guard let directory = opendir("/proc/self/task") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let task = withUnsafeBytes(of: entry.pointee.d_name) { name in
                String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard task.first?.isNumber == true else { continue }
            let descriptor = open("/proc/self/task/\(task)/comm", O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { continue }  // the thread ended meanwhile
            var buffer = [UInt8](repeating: 0, count: 64)
            let length = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
            guard length > 0 else { continue }
            if String(decoding: buffer[0..<length], as: UTF8.self).trimmingNewline == name { count += 1 }
        }
        return count
    }

    /// Whether `condition` became true within `timeout` (checked every millisecond): for a
    /// thread's start or end, which nothing else signals; the timeout is a safety net only.
    public static func wait(upTo timeout: Duration = .seconds(30), until condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            usleep(1000)
        }
        return true
    }
}

extension String {
    fileprivate var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
