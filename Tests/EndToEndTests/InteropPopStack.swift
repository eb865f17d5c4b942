import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The strict proof-of-possession server of the interop stack (`stack up --pop`,
/// scripts/interop/pop/app.py): its URLs, its client and issuer registrations, its ledger, and keys
/// made with the openssl command-line tool.
extension InteropStack {
    /// The server's origin (also its issuer).
    var popURL: String { values["POP_URL"] ?? "" }
    /// Its token endpoint.
    var popTokenURL: String { popURL + "/token" }
    /// Its state directory: `clients/`, `issuers/`, `ledger.jsonl`.
    var popState: URL { URL(fileURLWithPath: values["POP_STATE"] ?? "") }

    /// A private key made by openssl: its PEM file (0600) and public PEM.
    struct TestKey: Sendable {
        let privatePath: String
        let privatePEM: String
        let publicPEM: String
    }

    /// Makes a key with the openssl CLI: `ec` (P-256) or `rsa` (2048 bits).
    func makeKey(_ type: String, name: String) async throws -> TestKey {
        let path = stateDirectory.appendingPathComponent("\(name).key").path
        let options =
            type == "ec"
            ? ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
            : ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
        let made = try await Self.run(
            "/usr/bin/openssl", ["genpkey"] + options + ["-out", path], in: stateDirectory, timeout: .seconds(60))
        guard made.status == 0 else { throw Failure(description: "openssl genpkey failed: \(made.stderr)") }
        chmod(path, 0o600)
        let pub = try await Self.run(
            "/usr/bin/openssl", ["pkey", "-in", path, "-pubout"], in: stateDirectory, timeout: .seconds(60))
        guard pub.status == 0 else { throw Failure(description: "openssl pkey failed: \(pub.stderr)") }
        return TestKey(
            privatePath: path, privatePEM: try String(contentsOfFile: path, encoding: .utf8), publicPEM: pub.stdout)
    }

    /// Registers (or replaces) a client at the server.
    func registerPopClient(_ clientID: String, _ registration: [String: JSONValue]) throws {
        let directory = popState.appendingPathComponent("clients")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONValue.object(JSONObject(registration.map { (key: $0.key, value: $0.value) })).jsonText.write(
            to: directory.appendingPathComponent("\(clientID).json"), atomically: true, encoding: .utf8)
    }

    /// Trusts `publicPEM` for jwt-bearer assertions whose `iss` is `issuer`.
    func trustAssertionIssuer(_ issuer: String, publicPEM: String) throws {
        let directory = popState.appendingPathComponent("issuers")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try publicPEM.write(to: directory.appendingPathComponent("\(issuer).pem"), atomically: true, encoding: .utf8)
    }

    /// Every ledger entry so far, oldest first (optionally only those of `event`).
    func popLedger(_ event: String? = nil) throws -> [JSONValue] {
        let url = popState.appendingPathComponent("ledger.jsonl")
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }.filter {
            event == nil || $0["event"]?.stringValue == event
        }
    }

    /// A JWT assertion signed with `key` (scripts/interop/pop/mint.py), as a workload platform
    /// would issue one.
    func mintAssertion(key: TestKey, issuer: String, subject: String, audience: String) async throws -> String {
        let python = values["VENV_PYTHON"] ?? "python3"
        let script = Self.repositoryRoot.appendingPathComponent("scripts/interop/pop/mint.py").path
        let minted = try await Self.run(
            python, [script, "--key", key.privatePath, "--iss", issuer, "--sub", subject, "--aud", audience],
            in: stateDirectory, timeout: .seconds(60))
        guard minted.status == 0 else { throw Failure(description: "mint.py failed: \(minted.stderr)") }
        return minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Writes `text` to `path` (mode 0600) by replacing the file, as a platform rotates a token file.
    func replaceSecretFile(_ path: String, with text: String) throws {
        let temporary = path + ".new"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        chmod(temporary, 0o600)
        guard rename(temporary, path) == 0 else { throw Failure(description: "rename failed") }
    }

    /// A config whose environment's base URL is the server's `/resource`, with these profiles.
    func startPopRelay(
        profiles: [(name: String, lines: [String])], environment: [String: String] = [:], store: String? = nil,
        logLevel: String = "debug"
    ) throws -> RelayProcess {
        let config = try writeConfig(profiles: profiles, store: store, baseURL: popURL + "/resource")
        return try RelayProcess(
            ["--config", config, "--log-level", logLevel], environment: environment, testMethods: false)
    }
}

/// Lines of a PEM text's body (what must never appear in any output).
func pemBodyLines(_ pem: String) -> [String] {
    pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 16 }
}
