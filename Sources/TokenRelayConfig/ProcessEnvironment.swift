#if canImport(Glibc)
    import Glibc
#endif

/// The process's environment variables.
public enum ProcessEnvironment {
    /// Every `NAME=value` entry of `environ` (the first one of a name wins, as with `getenv`).
    /// Read directly: `ProcessInfo.processInfo.environment` first initialises ProcessInfo and
    /// goes through Foundation at start.
    public static func current() -> [String: String] {
        guard let entries = Optional(environ) else { return [:] }
        return variables(entries)
    }

    /// The `NAME=value` entries of a null-terminated array like `environ` (entries without `=`
    /// skipped, the first one of a name kept).
    static func variables(_ entries: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> [String: String] {
        var count = 0
        while entries[count] != nil { count += 1 }
        // Sized once (no regrowth). The first entry of a name wins, as with `getenv`, and keeps its
        // own spelling of the name (it goes into the environment of the commands run).
        var variables: [String: String] = Dictionary(minimumCapacity: count)
        for index in 0..<count {
            guard let pointer = entries[index] else { continue }
            // Straight from the C string's bytes (not a String cut in two and copied), on every
            // start's path. Invalid UTF-8 is repaired as `String(cString:)` repairs it.
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[..<equals]), as: UTF8.self)
                if variables[name] == nil {
                    variables[name] = String(
                        decoding: UnsafeBufferPointer(rebasing: bytes[(equals + 1)...]), as: UTF8.self)
                }
            }
        }
        return variables
    }
}
