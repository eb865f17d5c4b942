import FoundationEssentials
import Glibc
import Synchronization
import TokenRelayConfig
import TokenRelayJSONRPC
import TokenRelayLogging
import TokenRelayPlatform
import TokenRelayServer

/// `tokenrelay exec [--env E] [--profile P] [--listen ADDR] -- CMD ARGS...` (SPEC §12): runs CMD
/// with a private authenticating endpoint for its lifetime. The child gets the endpoint's URL and
/// a placeholder, never a credential; every variable a secret source of the config reads is
/// removed from its environment. Its exit status is exec's (128+signal when killed); SIGINT,
/// SIGTERM and SIGHUP are forwarded to it; the endpoint closes when it exits.
enum ExecCommand {
    static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        let split = arguments.firstIndex(of: "--")
        let own = split.map { Array(arguments[..<$0]) } ?? arguments
        let command = split.map { Array(arguments[($0 + 1)...]) } ?? []
        var parser = ArgumentParser(own, for: "exec")
        var options = CommandOptions()
        var listen = ExecEndpoint.Listen.loopback
        do throws(ArgumentError) {
            while let argument = try parser.next() {
                if try options.take(argument, from: &parser) { continue }
                switch argument {
                case "--listen":
                    let value = try parser.value(for: argument)
                    guard value.hasPrefix("unix:"), value.count > 5 else {
                        throw ArgumentError("--listen takes unix:PATH (the default is 127.0.0.1 at a random port)")
                    }
                    listen = .unix(path: String(value.dropFirst(5)))
                default:
                    throw ArgumentError("exec takes the command after '--': tokenrelay exec [options] -- CMD ARGS...")
                }
            }
            guard !command.isEmpty else {
                throw ArgumentError("exec needs a command after '--': tokenrelay exec [options] -- CMD ARGS...")
            }
        } catch {
            return CommandLineTool.usageError(error.message, command: "exec")
        }
        log.configure(level: options.logLevel, format: .text)
        guard let settings = await CommandLineTool.loadSettings(path: options.configPath, environment: environment)
        else { return ExitCodes.config }
        let endpoint: ExecEndpoint
        do {
            endpoint = try await ExecEndpoint.start(
                settings: settings, environment: options.environment, profile: options.profile, listen: listen)
        } catch {
            let failure = (error as? ExecError).map { RPCError(code: .config, message: $0.description) }
            return CommandLineTool.fail(failure ?? ErrorMapping.rpcError(error), in: .call, prefix: "exec: ")
        }
        var childEnvironment = environment.filter { !settings.secretVariables.contains($0.key) }
        childEnvironment.merge(endpoint.childVariables) { _, new in new }

        let child = Atomic<pid_t>(0)
        // A signal that comes before the child exists is delivered to it as soon as it does.
        let early = Atomic<Int32>(0)
        let signalSources = ProcessSetup.onSignals([SIGINT, SIGTERM, SIGHUP]) { number in
            // Whoever takes the number back (this handler or the spawn below) delivers it.
            early.store(number, ordering: .sequentiallyConsistent)
            let pid = child.load(ordering: .sequentiallyConsistent)
            if pid > 0, early.exchange(0, ordering: .sequentiallyConsistent) != 0 { kill(pid, number) }
        }
        defer { withExtendedLifetime(signalSources) {} }
        let pid: pid_t
        switch spawn(command, environment: childEnvironment) {
        case .success(let spawned): pid = spawned
        case .failure(let reason):
            await endpoint.close()
            await endpoint.finish()
            log.error("exec: cannot run \(command[0]): \(reason.reason)")
            return 127
        }
        child.store(pid, ordering: .sequentiallyConsistent)
        let pending = early.exchange(0, ordering: .sequentiallyConsistent)
        if pending != 0 { kill(pid, pending) }
        let serving = Placement.task { await endpoint.serve() }
        let status = await waitForExit(pid)
        child.store(0, ordering: .releasing)
        await endpoint.close()
        await serving.value
        await endpoint.finish()
        return status
    }

    /// Starts `command` (looked up in PATH) with `environment`, the signals at their default
    /// actions and unblocked, stdin, stdout and stderr inherited.
    private static func spawn(_ command: [String], environment: [String: String]) -> Result<pid_t, SpawnFailure> {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        // posix_spawnp looks the program up in the PATH of this process (as a shell would).
        let code = posix_spawnp(&pid, command[0], nil, &attributes, argv, envp)
        guard code == 0 else { return .failure(SpawnFailure(reason: String(cString: strerror(code)))) }
        return .success(pid)
    }

    /// Why the program could not be started.
    struct SpawnFailure: Error {
        var reason: String
    }

    /// Waits for `pid` on a thread of its own; its exit status, or 128+signal.
    private static func waitForExit(_ pid: pid_t) async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let started = SystemThread.start(named: "relay-exec-wait") {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let low = status & 0x7F
                continuation.resume(returning: low == 0 ? (status >> 8) & 0xFF : 128 + low)
            }
            if !started { continuation.resume(returning: 1) }
        }
    }
}
