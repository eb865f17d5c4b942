import CCurl
import CSystem
import FoundationEssentials
import Synchronization
import TokenRelayLogging
import TokenRelayPlatform

#if canImport(Glibc)
    import Glibc
#endif

// ALL of the transport's unsafe C work lives in this file and CurlEventLoop+Options.swift (the
// easy handles' options); the URL API's lives in CurlURL.swift. CurlEventLoop+Input.swift is
// the adopted input (stdin), read between transfers.
//
// Invariants:
// - One loop thread ("relay-curl") owns the CURLM handle and every easy handle: it alone
//   calls curl_multi_* and curl_easy_* on them. Other threads only append commands to `inbox`
//   (Mutex) and wake it through `wakeup`, an eventfd the loop polls beside libcurl's sockets
//   (one write to wake, one read to rearm: cheaper than curl_multi_wakeup's socket pair).
// - A CurlTransfer is retained by `active` for as long as its easy handle is attached to the
//   multi handle. Its address is the callbacks' context (CURLOPT_WRITEDATA, HEADERDATA, PRIVATE)
//   passed UNRETAINED: callbacks run only on the loop thread inside curl_multi_perform /
//   curl_easy_pause, i.e. while the transfer is attached and therefore alive.
// - Each pooled easy handle owns a CURL_ERROR_SIZE error buffer, freed with the handle.
// - String options are copied by libcurl; the request body is copied (COPYPOSTFIELDS); the
//   header slist lives until the handle is detached, then is freed (and the pooled handle's
//   CURLOPT_HTTPHEADER and CURLOPT_CURLU cleared).
// - A pooled easy handle is never reset: `setFixedOptions` sets what is the same for every
//   transfer once, and `configure` sets EVERY other option it uses on every transfer, to a value
//   or back to libcurl's default, so nothing of one request reaches the next.
// - Continuations are resumed on the loop thread, never while holding a lock.
// - The loop is also a TaskExecutor: a task that prefers it (``CurlTransport/executor``) runs its
//   jobs on the loop thread between transfers, so a request's task, its transfer and its answer
//   need no thread hand-off. A job never blocks (every wait in the code is a suspension), and a
//   job enqueued once the loop has stopped runs on the global executor: no job is ever dropped.
// - The loop may also read an input (the server's stdin, ``PolledInput``) that it adopted: it
//   polls the input's descriptor beside the eventfd (or checks it without waiting when commands
//   are queued, so a busy loop still reads), reads only what the input holds (it never waits for
//   input), leaves it out while the input may not read (its output backed up) until told it
//   may, and hands it back to its own thread when the loop stops. The input's descriptor stays
//   open while adopted (nothing closes stdin): libcurl's poll drops POLLNVAL for an extra
//   descriptor, so a closed one would wake the loop at once, every turn, with nothing to read.
// - The multi handle and the eventfd are released in deinit, so a late wake never touches a
//   freed handle or a reused descriptor (every caller of enqueue holds a reference to the loop).

/// An easy handle with its error buffer. Loop thread only.
struct CurlEasyHandle {
    let handle: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
}

/// The libcurl multi event loop behind ``CurlTransport``.
final class CurlEventLoop: @unchecked Sendable {  // Safe: inbox is a Mutex; the rest is loop-thread only (see above).
    enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
        case resume(CurlTransfer)
        /// The request body stream of the transfer has bytes (or its end) again.
        case resumeUpload(CurlTransfer)
        /// A job of a task that prefers this loop as its executor.
        case run(UnownedJob)
        /// An input to read from now on (``InputPoller/adopt(_:)``).
        case adopt(any PolledInput)
        /// The adopted input may read again.
        case inputMayRead
        case shutdown
    }

    private struct Inbox {
        var commands: [Command] = []
        var sleeping = false
        var closed = false
    }

    private let inbox = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    /// Written by `enqueue` when the loop sleeps; polled and read by the loop.
    private let wakeup: Int32
    let options: CurlTransport.Options
    /// The easy handles that hold a client certificate from an earlier transfer (loop thread
    /// only): only they are cleared for a transfer without one, so a request without a
    /// certificate costs no extra option calls.
    var handlesWithClientIdentity: Set<UnsafeMutableRawPointer> = []

    // Loop-thread only.
    private var active: [ObjectIdentifier: CurlTransfer] = [:]
    private var streams: [ObjectIdentifier: CurlTransfer] = [:]
    private var pool: [CurlEasyHandle] = []
    private var nextIdleCheck: UInt64 = .max
    /// CURLMOPT_MAXCONNECTS as last set (see ``keepConnections()``).
    private var connectionCacheSize = 0
    /// The adopted input, whether it waits to be told it may read, and what tells the loop so
    /// (made once per adoption, not per turn).
    var input: (any PolledInput)?
    var inputPaused = false
    var inputMayReadAgain: @Sendable () -> Void = {}

    /// The loop thread's name (Linux keeps 15 bytes of a thread name).
    static let threadName = "relay-curl"

    /// libcurl loaded and initialised, once for the process (thread-safe: a lazy static).
    static let isLibraryReady: Bool = tr_curl_load() == 1 && tr_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    init(options: CurlTransport.Options) throws(HTTPError) {
        guard Self.isLibraryReady else { throw .transport("libcurl could not be initialised") }
        let wakeup = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeup >= 0 else { throw .transport("no eventfd for the transfer loop (errno \(errno))") }
        guard let multi = tr_multi_init() else {
            close(wakeup)
            throw .transport("libcurl could not be initialised")
        }
        self.multi = multi
        self.wakeup = wakeup
        self.options = options
        _ = tr_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        keepConnections()
        if options.maxConnectionsPerHost > 0 {
            _ = tr_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, options.maxConnectionsPerHost)
        }
        guard SystemThread.start(named: Self.threadName, { [self] in self.run() }) else {
            throw .transport("no thread for the transfer loop")
        }
    }

    deinit {
        tr_multi_cleanup(multi)
        close(wakeup)
    }

    // MARK: Any thread

    /// Queues `command` for the loop; `false` when the loop is shut down.
    @discardableResult
    func enqueue(_ command: Command) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            if inbox.closed { return (false, false) }
            inbox.commands.append(command)
            if case .shutdown = command { inbox.closed = true }
            let wake = inbox.sleeping
            inbox.sleeping = false
            return (true, wake)
        }
        if wake { _ = eventfd_write(wakeup, 1) }
        return accepted
    }

    // MARK: Loop thread

    private func run() {
        var batch: [Command] = []
        batch.reserveCapacity(64)
        while true {
            inbox.withLock { inbox in
                swap(&batch, &inbox.commands)
                inbox.sleeping = false
            }
            var stop = false
            for command in batch {
                switch command {
                case .add(let transfer): stop ? finish(transfer, .failure(HTTPError.cancelled)) : add(transfer)
                case .cancel(let transfer): cancel(transfer)
                case .resume(let transfer): resume(transfer)
                case .resumeUpload(let transfer):
                    if transfer.isActive, let easy = transfer.easy {
                        // Unpauses both ways: a paused receive pauses again in its callback.
                        _ = tr_easy_pause(easy.handle, tr_pause_cont())
                    }
                case .run(let job): job.runSynchronously(on: asUnownedTaskExecutor())
                case .adopt(let adopted): take(adopted)
                case .inputMayRead: inputPaused = false
                case .shutdown: stop = true
                }
            }
            batch.removeAll(keepingCapacity: true)
            if stop {
                teardown()
                return
            }
            var running: Int32 = 0
            _ = tr_multi_perform(multi, &running)
            drainMessages()
            let timeout = checkIdle()
            let mayPoll = inbox.withLock { inbox -> Bool in
                guard inbox.commands.isEmpty else { return false }
                inbox.sleeping = true
                return true
            }
            let inputDescriptor = readableInputDescriptor()
            if mayPoll {
                var waits = (
                    curl_waitfd(fd: wakeup, events: Int16(CURL_WAIT_POLLIN), revents: 0),
                    curl_waitfd(fd: inputDescriptor ?? -1, events: Int16(CURL_WAIT_POLLIN), revents: 0)
                )
                let inputReady = withUnsafeMutablePointer(to: &waits) { pointer in
                    pointer.withMemoryRebound(to: curl_waitfd.self, capacity: 2) { waits in
                        _ = tr_multi_poll(multi, waits, inputDescriptor == nil ? 1 : 2, timeout, nil)
                        return waits[1].revents != 0
                    }
                }
                if waits.0.revents != 0 {
                    var count: eventfd_t = 0
                    _ = eventfd_read(wakeup, &count)
                }
                if inputReady {
                    // Awake: the requests read below queue their jobs without a wake-up write.
                    inbox.withLock { $0.sleeping = false }
                    readInput()
                }
            } else if let inputDescriptor {
                var entry = pollfd(fd: inputDescriptor, events: Int16(POLLIN), revents: 0)
                if poll(&entry, 1, 0) > 0 { readInput() }
            }
        }
    }

    private func add(_ transfer: CurlTransfer) {
        if transfer.cancelRequested {
            finish(transfer, .failure(HTTPError.cancelled))
            return
        }
        let easy: CurlEasyHandle
        if let pooled = pool.popLast() {
            easy = pooled
        } else if let handle = tr_easy_init() {
            easy = CurlEasyHandle(handle: handle, errorBuffer: .allocate(capacity: Int(tr_error_size())))
            setFixedOptions(easy)
        } else {
            finish(transfer, .failure(HTTPError.transport("libcurl could not create a transfer")))
            return
        }
        transfer.easy = easy
        if let error = configure(easy, for: transfer) {
            release(transfer)
            finish(transfer, .failure(error))
            return
        }
        transfer.lastActivityNanoseconds = Self.now()
        guard tr_multi_add_handle(multi, easy.handle) == CURLM_OK else {
            release(transfer)
            finish(transfer, .failure(HTTPError.transport("libcurl refused the transfer")))
            return
        }
        transfer.isActive = true
        let id = ObjectIdentifier(transfer)
        active[id] = transfer
        keepConnections()
        if case .stream = transfer.sink, transfer.idleTimeoutNanoseconds > 0 {
            streams[id] = transfer
            nextIdleCheck = min(nextIdleCheck, transfer.lastActivityNanoseconds &+ transfer.idleTimeoutNanoseconds)
        }
    }

    /// Sets how many connections libcurl keeps open after use: ``CurlTransport/Options/keptConnections``,
    /// or four per attached transfer when more are attached, never lowered. libcurl's own default
    /// is four per transfer attached *at the moment a connection is returned*, so whenever the
    /// number attached dips (a burst answered, the next not yet sent) it closed connections the
    /// next burst then opened again: at 64 requests in flight, one request in twenty paid a new
    /// connection (1,562 connects for 31,000 requests, against 64 now). Idle connections still
    /// close after libcurl's idle bound (CURLOPT_MAXAGE_CONN, 118 s).
    private func keepConnections() {
        let wanted = max(options.keptConnections, 4 * active.count)
        guard wanted > connectionCacheSize else { return }
        connectionCacheSize = wanted
        _ = tr_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, wanted)
    }

    private func cancel(_ transfer: CurlTransfer) {
        guard transfer.isActive else {
            transfer.cancelRequested = true
            return
        }
        detach(transfer)
        finish(transfer, .failure(HTTPError.cancelled))
    }

    private func resume(_ transfer: CurlTransfer) {
        guard transfer.isActive, let easy = transfer.easy, case .stream(let channel) = transfer.sink else { return }
        channel.markResumed()
        let now = Self.now()
        transfer.lastActivityNanoseconds = now
        if transfer.idleTimeoutNanoseconds > 0 {
            nextIdleCheck = min(nextIdleCheck, now &+ transfer.idleTimeoutNanoseconds)
        }
        // May call the write callback (and pause again) synchronously.
        _ = tr_easy_pause(easy.handle, tr_pause_cont())
    }

    private func drainMessages() {
        var remaining: Int32 = 0
        while let message = tr_multi_info_read(multi, &remaining) {
            guard tr_msg_is_done(message) != 0, let handle = message.pointee.easy_handle else { continue }
            let code = tr_msg_result(message)
            var context: UnsafeMutableRawPointer? = nil
            _ = tr_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let errorText = code == CURLE_OK ? "" : Self.errorText(code, transfer.easy)
            detach(transfer)
            finish(transfer, Self.outcome(code, errorText: errorText, transfer: transfer))
        }
    }

    /// Fails stalled streams; returns the poll timeout in milliseconds.
    private func checkIdle() -> Int32 {
        guard !streams.isEmpty else {
            nextIdleCheck = .max
            return 60_000
        }
        var now = Self.now()
        if now >= nextIdleCheck {
            var next = UInt64.max
            var stalled: [CurlTransfer] = []
            for transfer in streams.values {
                guard case .stream(let channel) = transfer.sink, !channel.isPaused else { continue }
                let deadline = transfer.lastActivityNanoseconds &+ transfer.idleTimeoutNanoseconds
                if deadline <= now { stalled.append(transfer) } else { next = min(next, deadline) }
            }
            nextIdleCheck = next
            for transfer in stalled {
                transfer.stalled = true
                detach(transfer)
                finish(
                    transfer,
                    .failure(HTTPStreamStalled(idleTimeout: .nanoseconds(Int64(transfer.idleTimeoutNanoseconds)))))
            }
            now = Self.now()
        }
        guard nextIdleCheck != .max else { return 60_000 }
        let wait = nextIdleCheck > now ? (nextIdleCheck - now) / 1_000_000 + 1 : 0
        return Int32(min(wait, 60_000))
    }

    /// Detaches an active transfer from the multi handle and returns its easy handle to the pool.
    private func detach(_ transfer: CurlTransfer) {
        guard transfer.isActive, let easy = transfer.easy else { return }
        _ = tr_multi_remove_handle(multi, easy.handle)
        transfer.isActive = false
        let id = ObjectIdentifier(transfer)
        active[id] = nil
        streams[id] = nil
        release(transfer)
    }

    /// Frees the header list and pools the easy handle of a transfer that is not attached.
    private func release(_ transfer: CurlTransfer) {
        tr_slist_free_all(transfer.headerList)
        transfer.headerList = nil
        if let easy = transfer.easy {
            transfer.easy = nil
            // The CURLU and the header list belong to the transfer and are freed with it: the
            // pooled handle must not point at them.
            _ = tr_easy_setopt_pointer(easy.handle, CURLOPT_CURLU, nil)
            _ = tr_easy_setopt_slist(easy.handle, CURLOPT_HTTPHEADER, nil)
            if pool.count < 256 {
                pool.append(easy)
            } else {
                tr_easy_cleanup(easy.handle)
                easy.errorBuffer.deallocate()
            }
        }
    }

    /// Resumes whoever waits on `transfer`. Loop thread, no lock held.
    private func finish(_ transfer: CurlTransfer, _ outcome: Result<Void, any Error>) {
        transfer.request.bodyStream?.abort()
        switch transfer.sink {
        case .buffered:
            guard let completion = transfer.completion else { return }
            transfer.completion = nil
            switch outcome {
            case .success:
                let head = transfer.currentHead
                completion.resume(
                    returning: HTTPResponse(status: head.status, headers: head.headers, body: transfer.body))
                transfer.body = []
            case .failure(let error):
                completion.resume(throwing: error)
            }
        case .stream(let channel):
            if let headContinuation = transfer.headContinuation {
                transfer.headContinuation = nil
                switch outcome {
                case .success: headContinuation.resume(returning: transfer.currentHead)
                case .failure(let error): headContinuation.resume(throwing: error)
                }
            }
            channel.finish(outcome)
        }
    }

    private func teardown() {
        input?.handBack()
        input = nil
        for transfer in Array(active.values) {
            detach(transfer)
            finish(transfer, .failure(HTTPError.cancelled))
        }
        for easy in pool {
            tr_easy_cleanup(easy.handle)
            easy.errorBuffer.deallocate()
        }
        pool.removeAll()
        // Commands that raced with the shutdown command.
        let late = inbox.withLock { inbox -> [Command] in
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        for command in late {
            switch command {
            case .add(let transfer): finish(transfer, .failure(HTTPError.cancelled))
            case .run(let job): globalConcurrentExecutor.enqueue(ExecutorJob(job))
            case .adopt(let adopted): adopted.handBack()
            case .cancel, .resume, .resumeUpload, .inputMayRead, .shutdown: break
            }
        }
    }

    // MARK: Helpers

    private static func outcome(_ code: CURLcode, errorText: String, transfer: CurlTransfer) -> Result<Void, any Error>
    {
        if code == CURLE_OK { return .success(()) }
        if transfer.bodyTooLarge || code == CURLE_FILESIZE_EXCEEDED, case .buffered(let limit) = transfer.sink {
            return .failure(HTTPError.bodyTooLarge(limit: limit))
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT: return .failure(HTTPError.timeout)
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
            CURLE_USE_SSL_FAILED:
            return .failure(HTTPError.tls(errorText))
        case CURLE_URL_MALFORMAT: return .failure(HTTPError.invalidURL(errorText))
        // CURLE_UNSUPPORTED_PROTOCOL too: the URL was checked to be http(s) (ParsedURL), so it is
        // a garbled reply ("Received HTTP/0.9..."), the server's fault, and may be retried.
        default: return .failure(HTTPError.transport(errorText))
        }
    }

    /// libcurl's message for a failure: the error buffer, else the code's generic text; made an
    /// error message by ``errorMessage(_:)``.
    private static func errorText(_ code: CURLcode, _ easy: CurlEasyHandle?) -> String {
        var text = ""
        if let easy, easy.errorBuffer[0] != 0 {
            text = String(cString: easy.errorBuffer)
        } else if let generic = tr_easy_strerror(code) {
            text = String(cString: generic)
        }
        return errorMessage(text)
    }

    /// libcurl's error text as it may appear in an error message: it can quote what the server
    /// sent (a garbled status line, a certificate's names), so like any server text it is
    /// redacted, stripped of control characters and bounded (``ServerText``, 256 bytes).
    static func errorMessage(_ text: String) -> String {
        ServerText(text).value
    }

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let ms = seconds.multipliedReportingOverflow(by: 1000)
        if ms.overflow || seconds < 0 { return seconds < 0 ? 1 : Int.max / 2 }
        return max(1, Int(ms.partialValue) + Int(attoseconds / 1_000_000_000_000_000))
    }

    /// Monotonic nanoseconds.
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}

extension CurlEventLoop: TaskExecutor {
    /// Runs `job` on the loop thread (the global executor once the loop has stopped).
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if !enqueue(.run(job)) { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }
}
