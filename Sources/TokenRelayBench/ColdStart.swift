import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Cold start: the time from `posix_spawn` to the first complete line on the child's stdout.
enum ColdStart {
    /// Spawns `argv`, writes `line`, and returns nanoseconds until a newline comes back; then
    /// closes stdin and reaps the child (not timed). With `libraries`, also returns the shared
    /// libraries the child had mapped when it answered (file names from `/proc/<pid>/maps`).
    static func firstAnswer(_ argv: [String], line: String, libraries: Bool = false) -> (
        nanos: UInt64, libraries: [String]
    ) {
        let start = monotonicNanos()
        let child = ChildProcess.spawn(argv, stderrPath: "/dev/null")
        Array((line + "\n").utf8).withUnsafeBytes { writeAll(child.input, $0) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var elapsed: UInt64 = 0
        reading: while true {
            let count = buffer.withUnsafeMutableBytes { read(child.output, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { die("\(argv[0]) closed stdout before answering") }
            for index in 0..<count where buffer[index] == 0x0A {
                elapsed = monotonicNanos() - start
                break reading
            }
        }
        let mapped = libraries ? mappedLibraries(child.pid) : []
        child.stop()
        return (elapsed, mapped)
    }

    /// The shared libraries (`*.so*` file names, sorted, unique) `pid` has mapped.
    static func mappedLibraries(_ pid: Int32) -> [String] {
        // Read to the end with read(2): a /proc file reports size 0, so size-based readers stop early.
        let descriptor = open("/proc/\(pid)/maps", O_RDONLY)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        let maps = String(decoding: bytes, as: UTF8.self)
        var names = Set<String>()
        for line in maps.split(separator: "\n") {
            guard let path = line.split(separator: " ", omittingEmptySubsequences: true).last, path.hasPrefix("/"),
                let name = path.split(separator: "/").last, name.contains(".so")
            else { continue }
            names.insert(String(name))
        }
        return names.sorted()
    }

    /// The median of `values`, in the same unit.
    static func median(_ values: [UInt64]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? Double(sorted[middle]) : Double(sorted[middle - 1] + sorted[middle]) / 2
    }
}
