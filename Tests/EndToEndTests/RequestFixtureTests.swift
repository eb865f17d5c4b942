import Foundation
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// The shared fixture server in its `recording` role (`TestSupport/Fixtures/fixture_server.py`),
/// one per test, stopped with SIGKILL. Every request it receives lands in a log file before the
/// response is written.
final class RecordingServer: Sendable {
    let fixture: FixtureServer
    /// Port of the routes (the environment's origin).
    let port: Int
    /// Port of a second server on another origin that records every request.
    let otherPort: Int
    /// A loopback port with no listener (connection refused).
    let closedPort: Int
    /// The JSON-lines request log.
    let logPath: String

    /// This target's own fixture scripts.
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    init() async throws {
        let directory = try TemporaryDirectory.make()
        logPath = directory.appendingPathComponent("requests.log").path
        try Data().write(to: URL(fileURLWithPath: logPath))
        fixture = try await FixtureServer(role: "recording", [logPath], ports: 3)
        (port, otherPort, closedPort) = (fixture.ports[0], fixture.ports[1], fixture.ports[2])
    }

    var origin: String { "http://127.0.0.1:\(port)" }
    var otherOrigin: String { "http://127.0.0.1:\(otherPort)" }

    /// Every request received so far, in arrival order.
    func records() throws -> [RecordedRequest] {
        let text = try String(contentsOfFile: logPath, encoding: .utf8)
        return try text.split(separator: "\n").compactMap { line in
            let value = try JSONParser.parse(String(line))
            return value["method"] == nil ? nil : RecordedRequest(value)
        }
    }

    /// The last request received on `path` by the main server.
    func last(_ path: String) throws -> RecordedRequest? {
        try records().last { $0.server == "main" && $0.path == path }
    }

    /// The whole log as text (requests and events), for "was this secret received" checks.
    var logText: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
}

/// One request as the recording server saw it.
struct RecordedRequest {
    let server: String
    let method: String
    let path: String
    let query: String
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    init(_ value: JSONValue) {
        server = value["server"]?.stringValue ?? ""
        method = value["method"]?.stringValue ?? ""
        path = value["path"]?.stringValue ?? ""
        query = value["query"]?.stringValue ?? ""
        headers = (value["headers"]?.arrayValue ?? []).compactMap { pair in
            guard let list = pair.arrayValue, list.count == 2, let name = list[0].stringValue,
                let value = list[1].stringValue
            else { return nil }
            return (name, value)
        }
        body = Data(base64Encoded: value["body"]?.stringValue ?? "").map { Array($0) } ?? []
    }

    /// Values of header `name` (any case), in order.
    func header(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// The raw `name=value` pairs of the query, in order.
    var queryPairs: [String] { query.split(separator: "&").map(String.init) }
}

/// A fresh folder under the temporary directory.
enum TemporaryDirectory {
    static func make() throws -> URL {
        try TestScratch.folder("tokenrelay-e2e")
    }

    /// Writes `text` to a new file named `name` in a fresh folder and returns its path.
    static func file(_ text: String, name: String = "config.yaml") throws -> String {
        let path = try make().appendingPathComponent(name).path
        try OffPool.write(text, to: path)
        return path
    }
}

/// A served relay with a config, answering one request at a time by id.
final class RelayClient: Sendable {
    let relay: RelayProcess

    init(config: String, environment: [String: String] = [:], arguments: [String] = []) throws {
        let path = try TemporaryDirectory.file(config)
        relay = try RelayProcess(["serve", "--config", path] + arguments, environment: environment)
    }

    /// Sends `method` with raw JSON `params` and returns the reply (`result` or `error` object).
    func call(_ method: String, _ params: String = "{}", id: String = UUID().uuidString) async throws -> JSONValue {
        try relay.send(#"{"jsonrpc":"2.0","id":"\#(id)","method":"\#(method)","params":\#(params)}"#)
        return try await reply(to: id)
    }

    /// Waits for the reply with string id `id`, however many other replies come first.
    func reply(to id: String) async throws -> JSONValue {
        var count = 1
        while true {
            let lines = try await relay.lines(atLeast: count)
            if let reply = lines.first(where: { $0["id"]?.stringValue == id }) { return reply }
            guard lines.count >= count else { throw RelayProcess.TimedOut(what: "reply \(id)") }
            count = lines.count + 1
        }
    }

    /// `request` with raw JSON params; the `result` object, or nil with an error.
    func request(_ params: String) async throws -> JSONValue {
        try await call("request", params)
    }

    /// Sends a notification (no reply expected).
    func notify(_ method: String, _ params: String) throws {
        try relay.send(#"{"jsonrpc":"2.0","method":"\#(method)","params":\#(params)}"#)
    }

    /// Closes stdin and waits for the exit code.
    func finish() async throws -> Int32 {
        try relay.closeStdin()
        return try await relay.exitCode()
    }
}

/// Bytes of a JSON-RPC reply's base64 body.
func decodedBase64(_ value: JSONValue?) -> [UInt8]? {
    guard let text = value?.stringValue, let data = Data(base64Encoded: text) else { return nil }
    return Array(data)
}

@Suite struct RequestFixtureTests {
    @Test func recordingServerLogsEveryRequestItAnswers() async throws {
        let server = try await RecordingServer()
        let client = try RelayClient(
            config: """
                version: 1
                environments:
                  local:
                    base_url: \(server.origin)
                """)
        let reply = try await client.request(#"{"path":"/status/204"}"#)
        #expect(reply["result"]?["status"] == .int(204))
        #expect(try server.last("/status/204")?.method == "GET")
    }
}
