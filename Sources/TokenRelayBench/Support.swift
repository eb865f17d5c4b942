import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Nanoseconds on the monotonic clock.
func monotonicNanos() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Throughput and latency percentiles of one measured phase, printed as one JSON object.
struct LoadResult {
    /// Requests answered successfully or not (every request sent is counted once answered).
    var completed: Int
    /// Answers that were errors (JSON-RPC error, transport failure, unexpected HTTP status).
    var errors: Int
    /// Wall time from the first request sent to the last answer received, in nanoseconds.
    var wallNanos: UInt64
    /// One round-trip time per request, in nanoseconds.
    var latencies: [UInt64]

    /// The measurements as JSON-ready values: throughput in requests per second, latencies in µs.
    func fields() -> [String: Any] {
        let sorted = latencies.sorted()
        func percentile(_ fraction: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
            return Double(sorted[max(0, index)]) / 1000
        }
        let seconds = Double(wallNanos) / 1e9
        return [
            "requests": completed,
            "errors": errors,
            "wall_s": rounded(seconds, 4),
            "throughput": rounded(seconds > 0 ? Double(completed) / seconds : 0, 1),
            "p50_us": rounded(percentile(0.50), 1),
            "p90_us": rounded(percentile(0.90), 1),
            "p99_us": rounded(percentile(0.99), 1),
            "max_us": rounded(Double(sorted.last ?? 0) / 1000, 1),
        ]
    }
}

/// `value` rounded to `places` decimals.
func rounded(_ value: Double, _ places: Int) -> Double {
    let scale = pow(10, Double(places))
    return (value * scale).rounded() / scale
}

/// Prints `object` as one line of JSON with sorted keys on stdout.
func printJSON(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
        FileHandle.standardError.write(Data("could not encode the result\n".utf8))
        return
    }
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write(Data("\n".utf8))
}

/// Stops the driver with a message on stderr and exit code 2.
func die(_ message: String) -> Never {
    FileHandle.standardError.write(Data("TokenRelayBench: \(message)\n".utf8))
    exit(2)
}

/// `--name value` options after the mode word; repeated names keep the last value.
struct Options {
    private var values: [String: String] = [:]

    /// Parses `arguments` (without the program name and the mode).
    init(_ arguments: [String]) {
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            guard name.hasPrefix("--") else { die("unexpected argument \(name)") }
            if index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") || arguments[index + 1] == "--" {
                values[String(name.dropFirst(2))] = arguments[index + 1]
                index += 2
            } else {
                values[String(name.dropFirst(2))] = ""
                index += 1
            }
        }
    }

    /// The string value of `--name`, or `fallback`.
    func string(_ name: String, _ fallback: String? = nil) -> String {
        if let value = values[name] { return value }
        if let fallback { return fallback }
        die("missing --\(name)")
    }

    /// The value of `--name` if given.
    func optional(_ name: String) -> String? { values[name] }

    /// The integer value of `--name`, or `fallback`.
    func int(_ name: String, _ fallback: Int) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text) else { die("--\(name) wants an integer") }
        return value
    }

    /// The number value of `--name`, or `fallback`.
    func double(_ name: String, _ fallback: Double) -> Double {
        guard let text = values[name] else { return fallback }
        guard let value = Double(text) else { die("--\(name) wants a number") }
        return value
    }

    /// Whether `--name` was given.
    func flag(_ name: String) -> Bool { values[name] != nil }
}

/// What /proc says about a process: CPU time and memory.
enum ProcStats {
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// User plus system CPU seconds of `pid` (0 when it cannot be read).
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command name: state is field 3; utime is field 14, stime field 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / ticksPerSecond
    }

    /// `VmRSS` and `VmHWM` of `pid` in KiB (0 when they cannot be read).
    static func memoryKiB(_ pid: Int32) -> (rss: Int, hwm: Int) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        var rss = 0
        var hwm = 0
        for line in text.split(separator: "\n") {
            let parts = line.split(omittingEmptySubsequences: true) { $0 == " " || $0 == "\t" }
            guard parts.count >= 2, let value = Int(parts[1]) else { continue }
            if parts[0] == "VmRSS:" { rss = value }
            if parts[0] == "VmHWM:" { hwm = value }
        }
        return (rss, hwm)
    }
}

/// CPU seconds of the driver, the child and any watched processes across one phase.
struct CPUSplit {
    private let pids: [(name: String, pid: Int32)]
    private let start: [Double]
    private let startNanos = monotonicNanos()

    /// Starts counting for `pids` (the driver itself is `self`).
    init(_ pids: [(name: String, pid: Int32)]) {
        self.pids = pids
        start = pids.map { ProcStats.cpuSeconds($0.pid) }
    }

    /// CPU use per process since `init`, as a percentage of one core over the wall time.
    func percentages() -> [String: Double] {
        let wall = Double(monotonicNanos() - startNanos) / 1e9
        var result: [String: Double] = [:]
        for (position, entry) in pids.enumerated() {
            let used = ProcStats.cpuSeconds(entry.pid) - start[position]
            result[entry.name, default: 0] += wall > 0 ? rounded(100 * used / wall, 1) : 0
        }
        return result
    }
}

/// `--watch name=pid,name=pid` as a list (several pids may share a name: their CPU adds up).
func watchedPids(_ text: String?) -> [(name: String, pid: Int32)] {
    guard let text, !text.isEmpty else { return [] }
    return text.split(separator: ",").compactMap { item in
        let parts = item.split(separator: "=")
        guard parts.count == 2, let pid = Int32(parts[1]) else { return nil }
        return (String(parts[0]), pid)
    }
}
