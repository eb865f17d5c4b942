import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where a test process keeps what it writes: one folder under the system's temporary directory
/// for the whole test process (`tokenrelay-tests-PID-XXXXXX`), made on first use and removed,
/// with everything in it, when the process exits. Every temporary folder a test makes is made in
/// it, so a run leaves nothing behind in the temporary directory however a test ends (a test
/// process that crashes leaves its one folder, named by its pid).
///
/// It also holds the private home every program a test starts gets (``ChildProcess`` puts it in
/// `HOME` and the XDG folders), so that no shell, editor, browser, git or Python tool a test runs
/// writes into the user's home.
public enum TestScratch {
    private static let root = Mutex<String?>(nil)

    /// The process's scratch folder (made on first use, removed at exit).
    public static var directory: URL {
        root.withLock { root in
            if let root { return URL(fileURLWithPath: root) }
            var template = Array(
                (FileManager.default.temporaryDirectory.path + "/tokenrelay-tests-\(getpid())-XXXXXX").utf8CString)
            let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
                guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
                return String(cString: base)
            }
            // mkdtemp fails only on a missing or read-only temporary directory: the tests cannot run.
            guard let made else {
                preconditionFailure("tests: no folder can be made under \(FileManager.default.temporaryDirectory.path)")
            }
            root = made
            atexit { TestScratch.removeAtExit() }
            return URL(fileURLWithPath: made)
        }
    }

    /// A new empty folder in the scratch folder, named `prefix-UUID`.
    public static func folder(_ prefix: String) throws -> URL {
        let url = directory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A path in the scratch folder that does not exist yet, named `prefix-UUID` (a program a test
    /// starts makes it, e.g. an `XDG_STATE_HOME`).
    public static func path(_ prefix: String) -> String {
        directory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    /// The home every program a test starts gets instead of the user's (one per test process).
    public static let home: String = {
        let home = directory.appendingPathComponent("home").path
        for folder in ["", "/.config", "/.cache", "/.local/share", "/.local/state"] {
            try? FileManager.default.createDirectory(atPath: home + folder, withIntermediateDirectories: true)
        }
        return home
    }()

    /// The variables that name the user's home and XDG folders, and the private value each gets.
    static var privateHomeVariables: [(name: String, value: String)] {
        [
            ("HOME", home), ("XDG_CONFIG_HOME", home + "/.config"), ("XDG_CACHE_HOME", home + "/.cache"),
            ("XDG_DATA_HOME", home + "/.local/share"), ("XDG_STATE_HOME", home + "/.local/state"),
        ]
    }

    /// `environment` with every home or XDG folder variable that is missing, or that names the
    /// user's own folder (as the test process has it), pointed at the private home, and without
    /// the user's session bus. A variable a test set to a folder or bus of its own is kept.
    public static func isolatingHome(_ environment: [String: String]) -> [String: String] {
        let own = ProcessInfo.processInfo.environment
        var isolated = environment
        for (name, value) in privateHomeVariables {
            let given = environment[name]
            if given == nil || given == own[name] { isolated[name] = value }
        }
        // Nor the user's session bus: its secret service would keep a store key of the test's.
        if let bus = own["DBUS_SESSION_BUS_ADDRESS"], environment["DBUS_SESSION_BUS_ADDRESS"] == bus {
            isolated["DBUS_SESSION_BUS_ADDRESS"] = nil
        }
        return isolated
    }

    /// A new private folder directly under /tmp (`/tmp/tr-NAME-XXXXXX`), removed at exit: for Unix
    /// sockets, whose path holds 107 bytes (the scratch folder's paths are longer on CI). Throws
    /// when /tmp refuses it.
    public static func socketFolder(_ name: String) throws -> String {
        var template = Array("/tmp/tr-\(name)-XXXXXX".utf8CString)
        let folder = try template.withUnsafeMutableBufferPointer { buffer -> String in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { throw POSIXError(.EIO) }
            return String(cString: base)
        }
        removeAtExit(folder)
        return folder
    }

    /// Folders outside the scratch folder (a socket's short path) removed at exit too.
    private static let others = Mutex<[String]>([])

    /// Removes `path` when the process exits, with the scratch folder: for a folder that must
    /// live elsewhere (a Unix socket's path holds 107 bytes) and that a daemon a test started may
    /// write into until it has ended.
    public static func removeAtExit(_ path: String) {
        _ = directory  // registers the removal at exit
        others.withLock { $0.append(path) }
    }

    private static func removeAtExit() {
        for path in others.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        guard let path = root.withLock({ $0 }) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }
}
