import Foundation
import Synchronization
import TestSupport
import Testing

@testable import TokenRelayJSONRPC

/// A real authorization server (Django OAuth Toolkit) and resource server started by
/// `scripts/interop/stack` in a state directory of its own, for the interop tests. Use
/// `InteropStack.with(...)`, which always brings the stack down again; the stack's watchdog
/// also stops it when the test process exits.
struct InteropStack: Sendable {
    /// The `stack up` settings a test needs.
    struct Options: Sendable {
        /// `--access-ttl`: access-token lifetime in seconds (`nil`: the stack's default, 3600).
        var accessTTL: Int?
        /// `--reuse-protection`: replaying a rotated refresh token revokes the family.
        var reuseProtection: Bool?
        /// `--rs-cache`: seconds the RS caches positive introspections (0: every request).
        var rsCache: Int?
        /// `--refresh-grace`: seconds a rotated refresh token stays usable.
        var refreshGrace: Int?
        /// `--token-gate`: hold refresh requests at the token endpoint (see ``TokenGate``).
        var tokenGate: Bool
        /// `--pop`: also start the strict proof-of-possession server (see InteropPopStack.swift).
        var pop: Bool

        init(
            accessTTL: Int? = nil, reuseProtection: Bool? = nil, rsCache: Int? = nil, refreshGrace: Int? = nil,
            tokenGate: Bool = false, pop: Bool = false
        ) {
            self.accessTTL = accessTTL
            self.reuseProtection = reuseProtection
            self.rsCache = rsCache
            self.refreshGrace = refreshGrace
            self.tokenGate = tokenGate
            self.pop = pop
        }
    }

    /// A failure of the stack or one of its tools.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The state directory (`stack.json`, DB, logs, configs written by tests).
    let stateDirectory: URL
    /// `stack.json`: `AS_URL`, `ISSUER`, `TOKEN_URL`, `REVOKE_URL`, `RS_URL`, `DB`...
    let values: [String: String]

    var issuer: String { values["ISSUER"] ?? "" }
    var tokenURL: String { values["TOKEN_URL"] ?? "" }
    var revokeURL: String { values["REVOKE_URL"] ?? "" }
    var rsURL: String { values["RS_URL"] ?? "" }

    static var repositoryRoot: URL { RelayProcess.repositoryRoot }
    static var stackScript: String { repositoryRoot.appendingPathComponent("scripts/interop/stack").path }

    /// Brings a stack up, runs `body`, and brings it down whatever happened. The state directory
    /// (logs, database) is removed after a clean run and kept when `body` threw.
    static func with<T: Sendable>(
        _ options: Options = Options(), _ body: (InteropStack) async throws -> T
    ) async throws -> T {
        let stack = try await up(options)
        do {
            let result = try await body(stack)
            try await stack.down()
            try? FileManager.default.removeItem(at: stack.stateDirectory)
            return result
        } catch {
            try? await stack.down()
            throw error
        }
    }

    /// `stack up` in a fresh temporary state directory, watched by this test process.
    static func up(_ options: Options) async throws -> InteropStack {
        let directory = try TestScratch.folder("tokenrelay-interop")
        var arguments = [
            "up", "--state", directory.path, "--watch-pid", String(getpid()), "--max-lifetime", "1800", "--timeout",
            "120",
        ]
        if let ttl = options.accessTTL { arguments += ["--access-ttl", String(ttl)] }
        if let reuse = options.reuseProtection { arguments += ["--reuse-protection", reuse ? "1" : "0"] }
        if let cache = options.rsCache { arguments += ["--rs-cache", String(cache)] }
        if let grace = options.refreshGrace { arguments += ["--refresh-grace", String(grace)] }
        if options.pop { arguments.append("--pop") }
        let gate = directory.appendingPathComponent("token-gate")
        if options.tokenGate {
            try FileManager.default.createDirectory(at: gate, withIntermediateDirectories: true)
            arguments += ["--token-gate", gate.path]
        }
        let result = try await run("/bin/bash", [stackScript] + arguments, in: directory, timeout: .seconds(600))
        guard result.status == 0 else {
            throw Failure(description: "stack up failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        let json = try String(contentsOf: directory.appendingPathComponent("stack.json"), encoding: .utf8)
        var values: [String: String] = [:]
        for (key, value) in try JSONParser.parse(json).objectValue ?? [:] {
            values[key] = value.stringValue ?? value.numberValue?.description
        }
        return InteropStack(stateDirectory: directory, values: values)
    }

    /// `stack down`.
    func down() async throws { try await stackCommand("down") }

    /// The `--token-gate` directory: `armed` holds refresh grants at the token endpoint (each
    /// writes an `arrived-*` file) until `release` exists.
    var tokenGate: URL { stateDirectory.appendingPathComponent("token-gate") }

    /// Holds refresh requests from now on; with `holdingResponses`, each is handled first (the
    /// refresh token rotated at the server) and its response is held.
    func armTokenGate(holdingResponses: Bool = false, grant: String? = nil) throws {
        if let grant { try Data(grant.utf8).write(to: tokenGate.appendingPathComponent("grant")) }
        if holdingResponses { try Data().write(to: tokenGate.appendingPathComponent("after")) }
        try Data().write(to: tokenGate.appendingPathComponent("armed"))
    }

    /// Holds no new request; those already held stay held until ``releaseTokenGate()``.
    func disarmTokenGate() throws {
        try FileManager.default.removeItem(at: tokenGate.appendingPathComponent("armed"))
    }

    /// Lets held requests (and later ones) through.
    func releaseTokenGate() throws {
        try? FileManager.default.removeItem(at: tokenGate.appendingPathComponent("armed"))
        try Data().write(to: tokenGate.appendingPathComponent("release"))
    }

    /// Waits until `condition` holds, looking again at a growing interval (5 ms to 200 ms) up to
    /// `timeout`: for state outside any process this test owns a pipe of (files, the AS ledger).
    func waitFor(
        _ what: String, timeout: Duration = .seconds(60), _ condition: () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var interval = Duration.milliseconds(5)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw Failure(description: "timed out waiting for \(what)") }
            try await Task.sleep(for: interval)
            interval = min(interval * 2, .milliseconds(200))
        }
    }

    /// How many refresh requests arrived at the armed token gate.
    func arrivedAtTokenGate() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: tokenGate.path)) ?? []).filter {
            $0.hasPrefix("arrived-")
        }.count
    }
    /// `stack stop-as`: token requests then get connection refused.
    func stopAuthorizationServer() async throws { try await stackCommand("stop-as") }
    /// `stack start-as`: the AS again on its port, with its database.
    func startAuthorizationServer() async throws { try await stackCommand("start-as") }

    private func stackCommand(_ command: String) async throws {
        let result = try await Self.run(
            "/bin/bash", [Self.stackScript, command, "--state", stateDirectory.path], in: stateDirectory,
            timeout: .seconds(180))
        guard result.status == 0 else {
            throw Failure(description: "stack \(command) failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
    }

    // MARK: - The authorization server's ledger

    /// How many access (or refresh) tokens the AS issued, to `client` or to anyone.
    func issuedCount(client: String? = nil, kind: String = "access") async throws -> Int {
        var arguments = ["--state", stateDirectory.path, "--kind", kind]
        if let client { arguments += ["--client", client] }
        let output = try await countTokens(arguments)
        guard let count = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw Failure(description: "count_tokens.py printed \(output)")
        }
        return count
    }

    /// Every token value the AS issued (access and refresh), oldest first.
    func issuedValues(client: String? = nil, kind: String = "all") async throws -> [String] {
        var arguments = ["--state", stateDirectory.path, "--kind", kind, "--values"]
        if let client { arguments += ["--client", client] }
        return try await countTokens(arguments).split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    private func countTokens(_ arguments: [String]) async throws -> String {
        let script = Self.repositoryRoot.appendingPathComponent("scripts/interop/count_tokens.py").path
        let result = try await Self.run(
            "/usr/bin/python3", [script] + arguments, in: stateDirectory, timeout: .seconds(60))
        guard result.status == 0 else { throw Failure(description: "count_tokens.py failed: \(result.stderr)") }
        return result.stdout
    }

    // MARK: - Direct HTTP (curl), for what the test itself does at the servers

    /// A form POST with HTTP Basic client authentication; returns the status and the body.
    func postForm(_ url: String, user: String, password: String?, fields: [String]) async throws -> (
        status: Int, body: JSONValue?
    ) {
        var arguments = ["-sS", "-X", "POST"]
        if let password {
            arguments += ["-u", "\(user):\(password)"]
        } else {
            arguments += ["-d", "client_id=\(user)"]
        }
        for field in fields { arguments += ["--data-urlencode", field] }
        return try await curl(arguments + [url])
    }

    /// A refresh token minted out of band with the password grant (`alice`), as a seed.
    func mintRefreshToken(client: String = "pwd", secret: String? = "pwd-secret") async throws -> String {
        let answer = try await postForm(
            tokenURL, user: client, password: secret,
            fields: ["grant_type=password", "username=alice", "password=alice-pw", "scope=read write"])
        guard answer.status == 200, let token = answer.body?["refresh_token"]?.stringValue else {
            throw Failure(description: "password grant failed with HTTP \(answer.status)")
        }
        return token
    }

    /// Revokes `token` at the AS (RFC 7009), authenticating as its client.
    func revoke(_ token: String, hint: String, client: String, secret: String?) async throws {
        let answer = try await postForm(
            revokeURL, user: client, password: secret, fields: ["token=\(token)", "token_type_hint=\(hint)"])
        guard answer.status == 200 else { throw Failure(description: "revocation failed with HTTP \(answer.status)") }
    }

    /// How many requests carrying `X-Request-Tag: tag` the RS received (on arrival, before auth).
    func received(tag: String) async throws -> Int {
        let answer = try await curl(["-sS", "\(rsURL)/counters?tag=\(tag)"])
        return (answer.body?["received"] ?? answer.body?[tag]?["received"])?.numberValue?.intValue ?? 0
    }

    /// Runs curl; the body is parsed as JSON when it is JSON.
    func curl(_ arguments: [String]) async throws -> (status: Int, body: JSONValue?) {
        let bodyFile = stateDirectory.appendingPathComponent("curl-\(UUID().uuidString).out")
        defer { try? FileManager.default.removeItem(at: bodyFile) }
        let result = try await Self.run(
            "/usr/bin/curl", ["--max-time", "60", "-o", bodyFile.path, "-w", "%{http_code}"] + arguments,
            in: stateDirectory, timeout: .seconds(90))
        guard result.status == 0, let status = Int(result.stdout) else {
            throw Failure(description: "curl failed (\(result.status)): \(result.stderr)")
        }
        let text = (try? String(contentsOf: bodyFile, encoding: .utf8)) ?? ""
        return (status, try? JSONParser.parse(text))
    }

    // MARK: - Configuration for tokenrelay

    /// Writes a config with one environment `interop` (base URL: the RS) and the given profiles
    /// (each a list of `key: value` lines); returns its path. The default `timeout` is a safety
    /// net, not a bound a test measures: it also bounds token requests, which a test may hold
    /// while other processes take their steps, slow on a loaded machine.
    func writeConfig(
        profiles: [(name: String, lines: [String])], timeout: String = "300s", store: String? = nil,
        baseURL: String? = nil
    ) throws -> String {
        var text = """
            version: 1
            \(store.map { "store: \($0)" } ?? "")
            default_environment: interop
            environments:
              interop:
                base_url: \(baseURL ?? rsURL)
                timeout: \(timeout)
                connect_timeout: 5s
                default_profile: \(profiles.first?.name ?? "none")
                profiles:

            """
        for profile in profiles {
            text += "      \(profile.name):\n"
            for line in profile.lines { text += "        \(line)\n" }
        }
        let path = stateDirectory.appendingPathComponent("config-\(UUID().uuidString.prefix(8)).yaml")
        try OffPool.write(text, to: path.path)
        return path.path
    }

    /// Profile lines for a `client_credentials` client found by discovery.
    func clientCredentials(client: String, secretVariable: String, auth: String = "client_secret_basic") -> [String] {
        [
            "type: client_credentials", "issuer: \(issuer)", "client_id: '\(client)'",
            "client_secret: { env: \(secretVariable) }", "client_auth: \(auth)", "scopes: [read]",
        ]
    }

    /// Starts tokenrelay on a config with these profiles (`serve`, NDJSON over pipes).
    func startRelay(
        profiles: [(name: String, lines: [String])], environment: [String: String] = [:], logLevel: String = "debug",
        timeout: String = "300s"
    ) throws -> RelayProcess {
        let config = try writeConfig(profiles: profiles, timeout: timeout)
        return try RelayProcess(
            ["--config", config, "--log-level", logLevel], environment: environment, testMethods: false)
    }

    // MARK: - Child processes

    /// Runs `executable` to completion with stdout and stderr in files (a daemon it leaves
    /// behind cannot hold a pipe open); SIGKILLed past `timeout`. `stdin` is its input (none when
    /// `nil`); `environment`, when given, replaces the inherited environment, which otherwise gets a
    /// fresh `XDG_STATE_HOME` (no tokenrelay a test runs writes into the user's session store).
    static func run(
        _ executable: String, _ arguments: [String], in directory: URL, timeout: Duration, stdin: String? = nil,
        environment: [String: String]? = nil
    ) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let name = UUID().uuidString
        let outURL = directory.appendingPathComponent(".run-\(name).out")
        let errURL = directory.appendingPathComponent(".run-\(name).err")
        let inURL = directory.appendingPathComponent(".run-\(name).in")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: inURL.path, contents: Data((stdin ?? "").utf8))
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
            try? FileManager.default.removeItem(at: inURL)
        }
        let inHandle = try FileHandle(forReadingFrom: inURL)
        defer { try? inHandle.close() }
        let outHandle = try FileHandle(forWritingTo: outURL)
        let errHandle = try FileHandle(forWritingTo: errURL)
        defer {
            try? outHandle.close()
            try? errHandle.close()
        }
        var variables = environment ?? ProcessInfo.processInfo.environment
        if environment == nil { variables["XDG_STATE_HOME"] = RelayProcess.freshStateHome() }
        let child = try ChildProcess(
            executable, arguments, environment: variables, directory: repositoryRoot.path,
            stdin: stdin == nil ? .null : .descriptor(inHandle.fileDescriptor),
            stdout: .descriptor(outHandle.fileDescriptor), stderr: .descriptor(errHandle.fileDescriptor))
        let status = try await child.wait(timeout: timeout).status
        let stdout = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
        return (status, stdout, stderr)
    }
}

extension RelayProcess {
    /// Sends one request with a fresh string id and waits for its answer.
    func call(_ method: String, _ params: JSONValue = .object([:]), timeout: Duration = .seconds(120)) async throws
        -> JSONValue
    {
        let id = "\(method)-\(UUID().uuidString.prefix(8))"
        let message: JSONValue = ["jsonrpc": "2.0", "id": .string(id), "method": .string(method), "params": params]
        try send(message.jsonText)
        return try await answer(id: id, timeout: timeout)
    }

    /// The answer with string id `id`, once it arrived.
    func answer(id: String, timeout: Duration = .seconds(120)) async throws -> JSONValue {
        try await firstLine(timeout: timeout, what: "answer \(id)") { $0["id"]?.stringValue == id }
    }

    /// Waits until a stdout line satisfies `match` and returns it.
    func firstLine(timeout: Duration, what: String, _ match: (JSONValue) -> Bool) async throws -> JSONValue {
        let deadline = ContinuousClock.now + timeout
        var wanted = 1
        while true {
            let lines = try await lines(atLeast: wanted, timeout: max(deadline - ContinuousClock.now, .milliseconds(1)))
            if let line = lines.first(where: match) { return line }
            guard ContinuousClock.now < deadline else { throw TimedOut(what: what) }
            wanted = lines.count + 1
        }
    }

    /// Every stdout line parsed so far (complete lines only).
    var parsedLines: [JSONValue] {
        stdoutText.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }
}

extension JSONValue {
    /// An integer member value, for brevity in assertions.
    var intValue: Int? { numberValue?.intValue }
}
