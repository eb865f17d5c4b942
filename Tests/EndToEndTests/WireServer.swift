import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// The listeners of `Fixtures/wire_server.py`, one process per test, stopped with SIGKILL: they
/// record every connection, TLS handshake, raw chunk and parsed request, so a test can assert
/// that a listener received nothing at all, or exactly which requests.
final class WireServer: Sendable {
    let fixture: FixtureServer
    let ports: [String: Int]
    let logPath: String

    /// Starts one listener per name (`name` or `name:tls`; TLS ones serve `certificate`) and
    /// waits, without blocking a thread of the shared pool, for its line of `name=PORT` words.
    init(_ listeners: [String], certificate: PrivateCA.Leaf? = nil) async throws {
        logPath = try TemporaryDirectory.make().appendingPathComponent("wire.log").path
        try Data().write(to: URL(fileURLWithPath: logPath))
        var arguments = [logPath] + listeners
        if let certificate { arguments += ["--cert", certificate.certificate, "--key", certificate.key] }
        fixture = try await FixtureServer(
            script: RecordingServer.fixtures.appendingPathComponent("wire_server.py").path, arguments,
            words: listeners.count)
        var ports: [String: Int] = [:]
        for word in fixture.words {
            let parts = word.split(separator: "=")
            if parts.count == 2, let port = Int(parts[1]) { ports[String(parts[0])] = port }
        }
        guard ports.count == listeners.count else {
            fixture.stop()
            throw FixtureServer.DidNotStart(description: "wire_server.py printed \(fixture.words)")
        }
        self.ports = ports
    }

    func port(_ name: String) -> Int { ports[name] ?? 0 }

    /// `http://127.0.0.1:PORT` (or `https://`) of listener `name`.
    func origin(_ name: String, scheme: String = "http") -> String { "\(scheme)://127.0.0.1:\(port(name))" }

    /// Every record so far, in order.
    func records() throws -> [JSONValue] {
        let text = try String(contentsOfFile: logPath, encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONParser.parse(String($0)) }
    }

    /// The records of listener `name` with `event`.
    func records(_ name: String, _ event: String) throws -> [JSONValue] {
        try records().filter { $0["listener"]?.stringValue == name && $0["event"]?.stringValue == event }
    }

    /// TCP connections listener `name` accepted.
    func accepts(_ name: String) throws -> Int { try records(name, "accept").count }

    /// Everything listener `name` received, as Latin-1 text (for "this secret never arrived").
    func rawText(_ name: String) throws -> String {
        var bytes: [UInt8] = []
        for record in try records(name, "raw") {
            bytes += Data(base64Encoded: record["bytes"]?.stringValue ?? "").map { Array($0) } ?? []
        }
        return String(bytes.map { Character(Unicode.Scalar($0)) })
    }

    /// The HTTP requests listener `name` parsed, in order.
    func requests(_ name: String) throws -> [JSONValue] { try records(name, "request") }

    /// The record of the request a wire_server answer (`result.json`) was the answer to.
    func request(answeredBy reply: JSONValue) throws -> JSONValue? {
        guard let seq = reply["result"]?["json"]?["seq"] else { return nil }
        return try records().first { $0["event"] == "request" && $0["seq"] == seq }
    }
}

extension JSONValue {
    /// The values of header `name` (any case) of a wire_server request record.
    func header(_ name: String) -> [String] {
        (self["headers"]?.arrayValue ?? []).compactMap { pair in
            guard let list = pair.arrayValue, list.count == 2, list[0].stringValue?.lowercased() == name.lowercased()
            else { return nil }
            return list[1].stringValue
        }
    }
}

/// A private certificate authority made by the openssl CLI for one test: a CA certificate (the
/// `ca_file`) and a leaf for 127.0.0.1 / localhost that it signed.
struct PrivateCA {
    struct Leaf {
        let certificate: String
        let key: String
    }

    struct Failed: Error, CustomStringConvertible {
        let description: String
    }

    /// The CA certificate (PEM).
    let caFile: String
    /// The server's certificate and key.
    let leaf: Leaf

    /// Runs openssl without blocking a thread of the shared pool.
    init() async throws {
        let folder = try TemporaryDirectory.make()
        func path(_ name: String) -> String { folder.appendingPathComponent(name).path }
        try Data("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n".utf8).write(
            to: URL(fileURLWithPath: path("leaf.ext")))
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await Self.openssl(
            ["req", "-x509"] + ec + [
                "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=tokenrelay test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try await Self.openssl(
            ["req"] + ec + ["-keyout", path("leaf.key"), "-out", path("leaf.csr"), "-subj", "/CN=127.0.0.1"])
        try await Self.openssl([
            "x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-out", path("leaf.pem"), "-days", "2", "-extfile", path("leaf.ext"),
        ])
        caFile = path("ca.pem")
        leaf = Leaf(certificate: path("leaf.pem"), key: path("leaf.key"))
    }

    private static func openssl(_ arguments: [String]) async throws {
        let folder = try TemporaryDirectory.make()
        let result = try await InteropStack.run("/usr/bin/openssl", arguments, in: folder, timeout: .seconds(120))
        guard result.status == 0 else {
            throw Failed(description: "openssl \(arguments[0]) failed: \(result.stderr)")
        }
    }
}

extension WireServer {
    /// A config file of one environment `local` on the `api` origin whose profile `svc` is a
    /// client-credentials client (its secret from `E2E_SECRET`), with `store` as its store line.
    func clientCredentialsConfig(store: String, exposeToken: Bool = false) throws -> String {
        try TemporaryDirectory.file(
            """
            version: 1
            store: \(store)
            default_environment: local
            environments:
              local:
                base_url: \(origin("api"))
                default_profile: svc
                profiles:
                  svc:
                    type: client_credentials
                    token_url: \(origin("api"))/token
                    client_id: svc
                    client_secret: { env: E2E_SECRET }
            \(exposeToken ? "        expose_token: true" : "")
            """)
    }
}
