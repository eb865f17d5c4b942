import Dispatch
import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

extension OneShot {
    /// The C libraries a one-shot `call` needs, loaded on a thread of their own beside the call's
    /// own start (its configuration, its runtime), in the order the call needs them.
    ///
    /// Loads do not overlap one another: every `dlopen` waits for the dynamic loader's lock, and
    /// while one maps and relocates a library no thread can be created (glibc holds its TLS lock
    /// throughout). libcurl's tree is the slowest, so it goes last (FINDINGS §12): libcrypto first (libcurl's own
    /// dependency, and the digest of a store key), then, once the call knows its profile, what
    /// the profile's session needs before the request (``TokenStore/prepare()``: libsqlite3 and
    /// the store's thread, whose opening then runs beside libcurl's load), then libcurl. A
    /// stored-token call otherwise opened libsqlite3 and its store only after libcurl's load.
    /// A configuration that takes longer to read than libcrypto to load delays libcurl by the
    /// difference. The call waits for libcurl without holding its thread (``loaded()``), so the
    /// session's first read of the store (``TokenManager/readAhead(_:)``) runs meanwhile.
    public final class CallLibraries: Sendable {
        private enum Step { case waiting, proceed, abandoned }

        /// What the loading thread shares with its owner.
        private final class Core: Sendable {
            let step = Mutex(Step.waiting)
            let decided = DispatchSemaphore(value: 0)
            /// Fired as the loading thread ends.
            let ended = OneShotSignal()

            func decide(_ step: Step) {
                let first = self.step.withLock { current in
                    guard current == .waiting else { return false }
                    current = step
                    return true
                }
                if first { decided.signal() }
            }
        }

        private let core = Core()

        private init() {}

        /// Starts loading: libcrypto now, libcurl once the call proceeds (``proceed()``).
        public static func startLoading() -> CallLibraries { startLoading(whenDone: {}) }

        /// ``startLoading()``, with `whenDone` run as the loading thread ends (tests).
        static func startLoading(whenDone: @escaping @Sendable () -> Void) -> CallLibraries {
            let libraries = CallLibraries()
            let core = libraries.core
            let started = SystemThread.start(named: "relay-lib-load") {
                defer {
                    core.ended.fire()
                    whenDone()
                }
                LibCrypto.load()
                core.decided.wait()
                if core.step.withLock({ $0 }) == .proceed { CurlTransport.loadLibrary() }
            }
            // No thread: nothing to wait for; each library loads on its first use instead.
            if !started { core.ended.fire() }
            return libraries
        }

        /// Lets libcurl load: the call has started what must come before it.
        func proceed() { core.decide(.proceed) }

        /// Returns once the loads have ended (after ``proceed()``: libcurl is loaded, or could not
        /// be), without holding the caller's thread meanwhile.
        func loaded() async { await core.ended.wait() }

        /// A call that ends before it proceeds (bad params): the thread ends without libcurl.
        deinit { core.decide(.abandoned) }
    }

    /// Before the request: starts what the profile's session needs ahead of libcurl's load (the
    /// store's opening and the session's first read of it, for a profile that keeps its session
    /// there), lets libcurl load, and waits for it without holding the thread, which runs the read
    /// meanwhile.
    static func proceed(_ libraries: CallLibraries, runtime: RelayRuntime, params: RequestParams) async {
        if params.auth, let environment = try? runtime.environment(params.environment),
            let profile = try? runtime.profile(params.profile, in: environment), let session = profile.session
        {
            runtime.manager.prepareStore()
            await runtime.manager.readAhead(session)
        }
        libraries.proceed()
        await libraries.loaded()
    }
}
