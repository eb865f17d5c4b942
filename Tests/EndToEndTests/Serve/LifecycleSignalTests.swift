import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// SPEC §4.2 lifecycle: signals, `shutdown` + `exit`. README "Signals" has the table these
/// tests hold the binary to.
@Suite struct LifecycleSignalTests {
    // MARK: - serve

    @Test(arguments: [SIGTERM, SIGINT, SIGQUIT])
    func stoppingSignalsDrainAnswerTheInFlightRequestAndExitZero(signal: Int32) async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"test/wait","params":{"ms":1500,"echo":"drained"}}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        // An answer means the server is running, with its signal handlers in place.
        _ = try await relay.lines(atLeast: 1)
        relay.signal(signal)
        #expect(try await relay.exitCode() == 0)
        let answers = try await relay.lines(atLeast: 2)
        let held = answers.first { $0["id"] == .int(1) }
        #expect(held?["result"]?["echo"] == "drained", "the in-flight request finished and was answered")
    }

    @Test func sighupReloadsWithoutStoppingAndTheInFlightRequestStillGetsItsAnswer() async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","id":1,"method":"test/wait","params":{"ms":3600000}}"#)
        try relay.send(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        _ = try await relay.lines(atLeast: 1)
        relay.signal(SIGHUP)
        try await relay.waitForStderr("SIGHUP received: reloading the configuration")
        try await relay.waitForStderr("configuration reloaded: 0 added, 0 changed, 0 removed")
        try relay.send(#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        try relay.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#)
        let answers = try await relay.lines(atLeast: 3)
        #expect(answers.first { $0["id"] == .int(3) }?["result"] == .object([:]), "still serving after SIGHUP")
        #expect(answers.first { $0["id"] == .int(1) }?["error"]?["code"] == .int(-32800))
        try relay.closeStdin()
        #expect(try await relay.exitCode() == 0)
    }

    @Test func shutdownThenExitInOneWriteExitsZeroEveryTime() async throws {
        var codes: [Int32] = []
        for _ in 0..<6 {
            try await withThrowingTaskGroup(of: Int32.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let relay = try RelayProcess()
                        try relay.write(
                            #"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"# + "\n"
                                + #"{"jsonrpc":"2.0","method":"exit"}"# + "\n")
                        return try await relay.exitCode()
                    }
                }
                for try await code in group { codes.append(code) }
            }
        }
        #expect(codes.count == 48)
        #expect(codes.allSatisfy { $0 == 0 }, "exit codes: \(codes)")
    }

    @Test func exitThenShutdownInOneWriteExitsOne() async throws {
        let relay = try RelayProcess()
        try relay.write(
            #"{"jsonrpc":"2.0","method":"exit"}"# + "\n" + #"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"# + "\n")
        #expect(try await relay.exitCode() == 1)
    }

    // MARK: - one-shot commands

    static func config(port: Int) throws -> String {
        try TemporaryDirectory.file(
            """
            version: 1
            default_environment: local
            environments:
              local:
                base_url: http://127.0.0.1:\(port)
                timeout: 1h
            """)
    }

    @Test(arguments: [SIGHUP, SIGTERM, SIGINT, SIGQUIT])
    func subscribeStopsAndExitsZeroOnHangupAsOnTerminate(signal: Int32) async throws {
        let server = try SilentServer()
        let relay = try RelayProcess(
            ["subscribe", "/events", "--no-auth", "--config", try Self.config(port: server.port)], testMethods: false)
        await server.connected.wait()
        relay.signal(signal)
        #expect(try await relay.exitCode() == 0)
    }

    @Test(arguments: [SIGHUP, SIGTERM])
    func callEndsOnHangupAsOnTerminate(signal: Int32) async throws {
        let server = try SilentServer()
        let relay = try RelayProcess(
            ["call", "GET", "/slow", "--no-auth", "--config", try Self.config(port: server.port)], testMethods: false)
        await server.connected.wait()
        relay.signal(signal)
        _ = try await relay.exitCode()
        #expect(relay.process.termination == .signalled(signal), "ended by the signal, as curl is")
        #expect(relay.stdoutText.isEmpty)
    }
}

/// A loopback TCP server that accepts connections and never answers: a request to it stays in
/// flight until the client gives up. ``connected`` fires at the first connection.
final class SilentServer: Sendable {
    let port: Int
    let connected = OneShotSignal()
    private let listener: Int32
    private final class Connections: Sendable {
        /// Guarded by the mutex: accepted connections, closed with the server.
        let fds = Mutex<[Int32]>([])
    }
    private let accepted = Connections()

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [accepted, connected] in
            while true {
                let connection = accept(fd, nil, nil)
                if connection < 0 {
                    if errno == EINTR { continue }
                    return
                }
                accepted.fds.withLock { $0.append(connection) }
                connected.fire()
            }
        }
        thread.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        accepted.fds.withLock { $0.forEach { close($0) } }
    }
}
