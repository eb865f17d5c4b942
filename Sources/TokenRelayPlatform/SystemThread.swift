#if canImport(Glibc)
    import Glibc
#endif

/// A detached system thread running one closure: what tokenrelay's long-lived threads (the
/// stdin reader until a curl loop takes stdin over, the stdout and stderr writers, each curl loop)
/// and its short-lived helpers are.
/// A pthread directly rather than Foundation's `Thread`, so that the process need not load
/// swift-corelibs-foundation (and ICU behind it) to start one: the modules import
/// FoundationEssentials only (scripts/bench.d/FINDINGS.md §9).
public enum SystemThread {
    /// Starts `body` on a new detached thread named `name` (``ThreadName``, at most 15 bytes).
    /// Returns `false` when the system refuses a thread (resource limits); the caller decides
    /// what that means for it.
    @discardableResult
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        let job = Unmanaged.passRetained(Job(name: name, body: body))
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let status = pthread_create(
            &thread, &attributes,
            { argument in
                guard let argument else { return nil }
                let job = Unmanaged<Job>.fromOpaque(argument).takeRetainedValue()
                ThreadName.set(job.name)
                job.body()
                return nil
            }, job.toOpaque())
        if status != 0 {
            job.release()
            return false
        }
        return true
    }

    private final class Job {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
