import Foundation
import HTTP

#if canImport(Glibc)
    import Glibc
#endif

/// The Python recording server of `Fixtures/test_server.py`, one per test, stopped with SIGKILL.
final class TestServer: Sendable {
    let process: Process
    /// Port of the main routes.
    let port: Int
    /// Port of the redirect target that records hits.
    let otherPort: Int
    /// A loopback port with no listener.
    let closedPort: Int
    /// The main routes over TLS, certificate `Fixtures/test_cert.pem` (self-signed for 127.0.0.1).
    let tlsPort: Int
    /// Path of the TLS server's certificate, to trust as a CA file.
    static let certificatePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/test_cert.pem").path

    init() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/test_server.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-u", script]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = process
        // The first line: the server prints it as soon as it listens.
        let line = await firstLine(of: output.fileHandleForReading)
        let ports = String(decoding: line, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
            .compactMap { Int($0) }
        guard ports.count == 4 else {
            kill(process.processIdentifier, SIGKILL)
            throw HTTPError.transport("test server did not start")
        }
        (port, otherPort, closedPort, tlsPort) = (ports[0], ports[1], ports[2], ports[3])
    }

    deinit { stop() }

    /// Kills the server (SIGTERM is blocked in test threads).
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// An absolute URL on the main port.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}

/// The decoded `/echo` reply.
struct Echo: Decodable {
    let method: String
    let path: String
    let headers: [[String]]
    let body: String

    var bodyBytes: [UInt8] { Data(base64Encoded: body).map { Array($0) } ?? [] }

    func values(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }

    init(_ response: HTTPResponse) throws {
        self = try JSONDecoder().decode(Echo.self, from: Data(response.body))
    }
}

/// Reads a fixture server's first line (its ports) on a thread of its own: a test must never
/// block a cooperative-pool thread while a Python process starts on a busy machine, or every
/// other test in the process stalls behind it.
func firstLine(of handle: FileHandle) async -> [UInt8] {
    await withCheckedContinuation { (continuation: CheckedContinuation<[UInt8], Never>) in
        Thread {
            var line: [UInt8] = []
            while !line.contains(0x0A) {
                let data = handle.availableData
                if data.isEmpty { break }
                line.append(contentsOf: data)
            }
            continuation.resume(returning: line)
        }.start()
    }
}
