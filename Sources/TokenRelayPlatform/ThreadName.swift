#if canImport(Glibc)
    import Glibc
#endif

/// The calling thread's name as the system shows it (`ps -L`, `top -H`, perf, gdb, crash
/// reports): `/proc/thread-self/comm`, which Linux bounds to 15 bytes. Set by each of
/// tokenrelay's own threads first thing (Foundation's `Thread.name` set before `start()` is not
/// applied to the system thread, and setting it from the thread races with `start()`).
public enum ThreadName {
    /// Names the calling thread (at most 15 bytes are kept). Best effort: a failure leaves the
    /// inherited name.
    public static func set(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        OutputFile.writeAll(descriptor, Array(name.utf8.prefix(15)))
    }

    /// The calling thread's name, or `nil` when it cannot be read.
    public static var current: String? {
        let descriptor = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        var name = buffer[0..<count]
        if name.last == UInt8(ascii: "\n") { name = name.dropLast() }
        return String(decoding: name, as: UTF8.self)
    }
}
