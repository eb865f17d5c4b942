import Synchronization

// The libFuzzer glue every fuzz target shares. A target is an `@main` type whose `main` calls
// `FuzzDriver.run(_:)` with a function of one input:
//   - built by scripts/fuzz (`-sanitize=fuzzer -DFUZZING`), libFuzzer's driver takes over the
//     process and calls that function once per generated input;
//   - otherwise the function runs once per file named on the command line (replaying a
//     reproducer from fuzz-artifacts/ or a corpus file under a debugger).
#if canImport(Glibc)
    import Glibc
#endif

/// Runs a fuzz target: under libFuzzer or, without it, over the files named on the command line.
public enum FuzzDriver {
    /// Hands the process to libFuzzer (with `-DFUZZING`) or replays the named files, then exits.
    public static func run(_ target: @escaping @Sendable ([UInt8]) -> Void) -> Never {
        #if FUZZING
            installedTarget.withLock { $0 = InstalledTarget(run: target) }
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzTestOneInput))
        #else
            for path in CommandLine.arguments.dropFirst() {
                guard let bytes = contents(ofFile: path) else {
                    print("\(path): unreadable")
                    continue
                }
                target(bytes)
                print("\(path): ok")
            }
            exit(0)
        #endif
    }

    /// The bytes of the file at `path`, or nil when it cannot be read.
    static func contents(ofFile path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return ferror(file) == 0 ? bytes : nil
    }
}

#if FUZZING
    /// The target, boxed: a function value kept directly in the generic `Mutex` was re-abstracted
    /// at every `withLock` (its `inout` written back through one more thunk), so each input called
    /// through one more layer and the stack overflowed after ~87,000 executions (issue 44's fuzz
    /// campaign; the 30 s runs of CI never got that far). A class reference is stored as it is.
    private final class InstalledTarget: Sendable {
        let run: @Sendable ([UInt8]) -> Void
        init(run: @escaping @Sendable ([UInt8]) -> Void) { self.run = run }
    }

    /// The target `FuzzDriver.run` installed before starting libFuzzer; set once, read per input.
    private let installedTarget = Mutex<InstalledTarget?>(nil)

    @_silgen_name("LLVMFuzzerRunDriver")
    private func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// libFuzzer's entry point for one input (the symbol its runtime looks for).
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        installedTarget.withLock { $0 }?.run(bytes)
        return 0
    }
#endif
