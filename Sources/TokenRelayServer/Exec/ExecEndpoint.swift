import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayAuth
import TokenRelayConfig
import TokenRelayHTTP
import TokenRelayLogging
import TokenRelayPlatform

/// `tokenrelay exec`'s endpoint (SPEC §12): an HTTP/1.1 server on 127.0.0.1 (or a Unix socket)
/// for one child process. `/ENV/...` is forwarded to that environment's `base_url` + `...` with
/// the profile's credentials, through the environment's one middleware stack under the forwarding
/// policy (``EnvironmentRuntime/forwardingClient(for:logIn:)``), once the request presents the
/// child's placeholder, names the endpoint as its `Host`, and passes the rules. Responses stream
/// back with the profile's known secrets masked (``Redactor/redact(stream:window:final:)``).
/// Logins never block: a session that needs a person is answered 401 naming `tokenrelay login`.
package final class ExecEndpoint: Sendable {
    /// Where the endpoint listens.
    package enum Listen: Sendable, Equatable {
        case loopback
        case unix(path: String)
    }

    /// One environment the endpoint serves.
    struct Served: Sendable {
        let environment: EnvironmentRuntime
        let profile: ProfileRuntime
        let client: HTTPClient
        let exec: ExecSettings
    }

    /// `127.0.0.1:PORT`, or `localhost` for a Unix socket.
    package let host: String
    /// The socket's path, or "".
    package let socketPath: String
    /// The child's placeholder.
    package let placeholder: String
    let served: [String: Served]
    let gate: ExecGate
    let runtime: RelayRuntime
    private let listener: ExecSocket
    /// The open connections, shut down when the endpoint closes. Guarded by the mutex.
    private let connections = Mutex<[ObjectIdentifier: ExecSocket]>([:])

    /// The largest request body kept whole, for one replay after a 401 (SPEC §12): a bigger one
    /// is sent as it arrives and never replayed.
    static let replayLimit = 1 << 20
    /// The bytes of a response body kept back at most to mask a secret split across chunks.
    static let maskWindow = 64 << 10

    private init(
        host: String, socketPath: String, placeholder: String, served: [String: Served], runtime: RelayRuntime,
        listener: ExecSocket
    ) {
        self.host = host
        self.socketPath = socketPath
        self.placeholder = placeholder
        self.served = served
        self.runtime = runtime
        self.listener = listener
        let port = host.split(separator: ":").last.map(String.init) ?? ""
        let hosts: Set<String>? = socketPath.isEmpty ? [host, "localhost:\(port)"] : nil
        gate = ExecGate(placeholder: placeholder, hosts: hosts)
    }

    /// Builds the runtime and starts listening: the environment `environment` names (or every one
    /// with an `exec:` block), with `profile` (or each one's default).
    package static func start(
        settings: Settings, environment: String?, profile: String?, listen: Listen
    ) async throws -> ExecEndpoint {
        let runtime = try await RelayRuntime.make(settings: settings, environmentOverride: environment)
        do {
            let names =
                environment.map { [$0] } ?? settings.environments.filter { $0.exec != nil }.map(\.name)
            guard !names.isEmpty else {
                throw ExecError("no environment to serve: give --env NAME, or add an exec: block to one")
            }
            var served: [String: Served] = [:]
            for name in names {
                let environmentRuntime = try runtime.environment(name)
                guard let profileRuntime = try runtime.profile(profile, in: environmentRuntime),
                    profileRuntime.credentials != nil
                else {
                    throw ExecError("environment '\(name)' has no usable profile")
                }
                let session = profileRuntime.name
                let client = environmentRuntime.forwardingClient(
                    for: profileRuntime,
                    logIn: {
                        throw AuthError.interactionRequired(
                            "the session needs a login: run `tokenrelay login --env \(name) --profile \(session)`")
                    })
                served[name] = Served(
                    environment: environmentRuntime, profile: profileRuntime, client: client,
                    exec: environmentRuntime.settings.exec ?? ExecSettings())
            }
            let placeholder = try Self.makePlaceholder()
            switch listen {
            case .loopback:
                let (socket, port) = try ExecSocket.listenLoopback()
                return ExecEndpoint(
                    host: "127.0.0.1:\(port)", socketPath: "", placeholder: placeholder, served: served,
                    runtime: runtime, listener: socket)
            case .unix(let path):
                let socket = try ExecSocket.listenUnix(path: path)
                return ExecEndpoint(
                    host: "localhost", socketPath: path, placeholder: placeholder, served: served, runtime: runtime,
                    listener: socket)
            }
        } catch {
            await runtime.close()
            throw error
        }
    }

    /// 256 random bits, base64url without padding.
    private static func makePlaceholder() throws(ExecError) -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        let got = fd < 0 ? -1 : bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, 32) }
        if fd >= 0 { Glibc.close(fd) }
        guard got == 32 else { throw ExecError("no random bytes for the placeholder") }
        let encoded = Data(bytes).base64EncodedString().utf8.compactMap { byte -> UInt8? in
            switch byte {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            case UInt8(ascii: "="): nil
            default: byte
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// The endpoint URL of environment `name`.
    package func url(of name: String) -> String { "http://\(host)/\(name)" }

    /// The variables the child gets: each served environment's `exec.env`, and `TOKENRELAY_URL`
    /// (the first served environment's URL, in name order) and `TOKENRELAY_TOKEN`.
    package var childVariables: [String: String] {
        var variables: [String: String] = [:]
        for name in served.keys.sorted() {
            guard let entry = served[name] else { continue }
            let values = ["url": url(of: name), "host": host, "token": placeholder, "socket": socketPath]
            for (variable, template) in entry.exec.env {
                variables[variable] = ExecSettings.expand(template, values: values)
            }
        }
        variables["TOKENRELAY_URL"] = served.keys.sorted().first.map(url(of:)) ?? "http://\(host)"
        variables["TOKENRELAY_TOKEN"] = placeholder
        return variables
    }

    /// Serves connections until ``close()``; returns once every connection has ended.
    package func serve() async {
        await withDiscardingTaskGroup { group in
            while let fd = await listener.accept() {
                let socket = ExecSocket(fd: fd, name: "relay-exec-conn")
                let id = ObjectIdentifier(socket)
                connections.withLock { $0[id] = socket }
                // On the transfer loop of the (first) served environment once it runs, as `request`
                // is: a request's transfer, its answer and its body need no hop to another thread.
                let loop = served.keys.sorted().first.flatMap { runtime.environmentTransports[$0]?.startedExecutor }
                group.addTask(executorPreference: Placement.forTransfer(loop: loop)) {
                    var connection = ExecConnection(endpoint: self, socket: socket)
                    await connection.run()
                    self.connections.withLock { _ = $0.removeValue(forKey: id) }
                }
            }
            let open = connections.withLock { $0.values }
            for socket in open { socket.shutdown() }
            group.cancelAll()
        }
    }

    /// Stops listening and ends the connections (their requests in flight end).
    package func close() async {
        listener.shutdown()
        if !socketPath.isEmpty { unlink(socketPath) }
    }

    /// Closes the runtime (after ``serve()`` returned).
    package func finish() async { await runtime.close() }
}
