import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// A real PostgreSQL server for one test (scripts/pg): an unprivileged cluster in a temp
/// directory on 127.0.0.1.
struct PostgresServer: Sendable {
    let directory: String
    let url: String
    let password: String

    static var script: String { RelayProcess.repositoryRoot.appendingPathComponent("scripts/pg").path }

    /// Starts a server, runs `body`, and removes the server whatever happened.
    static func with<T: Sendable>(_ body: (PostgresServer) async throws -> T) async throws -> T {
        let directory = "/tmp/tr-pg-\(UUID().uuidString.prefix(12))"
        try await run(["up", directory])
        let values = try String(contentsOfFile: directory + "/pg.env", encoding: .utf8).split(separator: "\n")
            .reduce(into: [String: String]()) { values, line in
                let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                if parts.count == 2 { values[parts[0]] = parts[1] }
            }
        let server = PostgresServer(
            directory: directory, url: values["PG_URL"] ?? "", password: values["PG_PASSWORD"] ?? "")
        do {
            let result = try await body(server)
            _ = try? await run(["down", directory])
            return result
        } catch {
            _ = try? await run(["down", directory])
            throw error
        }
    }

    @discardableResult
    static func run(_ arguments: [String]) async throws -> String {
        let result = try await InteropStack.run(
            "/bin/bash", [script] + arguments, in: URL(fileURLWithPath: NSTemporaryDirectory()),
            timeout: .seconds(120))
        guard result.status == 0 else {
            throw InteropStack.Failure(description: "scripts/pg \(arguments.first ?? "") failed: \(result.stderr)")
        }
        return result.stdout
    }

    func stop() async throws { try await Self.run(["stop", directory]) }
    func start() async throws { try await Self.run(["start", directory]) }
    /// Rows of `sql`, run as the superuser (tab-separated lines).
    func sql(_ sql: String) async throws -> String { try await Self.run(["sql", directory, sql]) }
}

/// Three hosts (three `tokenrelay serve` processes, each with its own state directory and SQLite
/// store) and one PostgreSQL shared tier, against the real authorization server (SPEC §11).
@Suite(.serialized) struct InteropFleetTests {
    static let storeKey = "mDj5mc3AX3m8Sks8vgd3lfXo5dN2B3oq/5+yk2mDsOQ="

    /// The `store:` of a fleet host.
    static func store(_ server: PostgresServer, timeout: String = "2s") -> String {
        "{encryption_key: {env: TR_STORE_KEY}, shared: {type: postgres, url: \"\(server.url)\", password: {env: TR_PG_PASSWORD}, timeout: \(timeout)}}"
    }

    /// Starts `count` hosts on `config`, each with a state directory of its own.
    static func hosts(
        _ count: Int, config: String, stack: InteropStack, server: PostgresServer, extra: [String: String] = [:]
    ) throws -> [RelayProcess] {
        try (0..<count).map { index in
            let state = stack.stateDirectory.appendingPathComponent("host\(index)-\(UUID().uuidString.prefix(6))").path
            try FileManager.default.createDirectory(
                atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var environment = [
                "SECRET": "svc-secret", "XDG_STATE_HOME": state, "TR_STORE_KEY": storeKey,
                "TR_PG_PASSWORD": server.password,
            ]
            environment.merge(extra) { _, new in new }
            return try RelayProcess(
                ["--config", config, "--log-level", "debug"], environment: environment, testMethods: false)
        }
    }

    /// Sends `count` requests to each host at once and returns every answer's status.
    static func storm(_ hosts: [RelayProcess], count: Int, profile: String = "service") async throws -> [Int] {
        let tag = UUID().uuidString.prefix(6)
        for (index, host) in hosts.enumerated() {
            for request in 0..<count {
                try host.send(
                    #"{"jsonrpc":"2.0","id":"\#(tag)-\#(index)-\#(request)","method":"request","params":{"path":"/whoami","profile":"\#(profile)"}}"#
                )
            }
        }
        var statuses: [Int] = []
        for (index, host) in hosts.enumerated() {
            for request in 0..<count {
                let answer = try await host.answer(id: "\(tag)-\(index)-\(request)", timeout: .seconds(60))
                statuses.append(answer["result"]?["status"]?.intValue ?? -1)
            }
        }
        return statuses
    }

    /// Ends the hosts; none ever wrote the store key or the database password.
    static func close(_ hosts: [RelayProcess], server: PostgresServer) async throws {
        for host in hosts {
            try host.closeStdin()
            #expect(try await host.exitCode() == 0, "\(host.stderrText.suffix(2000))")
            for secret in [storeKey, server.password] {
                #expect(!host.stderrText.contains(secret) && !host.stdoutText.contains(secret))
            }
        }
    }

    /// Every form of `value` a dump could show it in.
    static func encodings(_ value: String) -> [String] {
        let bytes = Data(value.utf8)
        return [
            value, bytes.base64EncodedString(), bytes.base64EncodedString().replacingOccurrences(of: "=", with: ""),
            bytes.map { String(format: "%02x", $0) }.joined(),
            value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value,
        ]
    }

    @Test func aColdStormOfThreeHostsGetsOneTokenAndTheTierHoldsNothingReadable() async throws {
        try await PostgresServer.with { server in
            try await InteropStack.with { stack in
                let seed = try await stack.mintRefreshToken()
                let config = try stack.writeConfig(
                    profiles: [
                        ("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET")),
                        (
                            "seeded",
                            InteropSharedStoreTests.seededProfile(stack).map {
                                $0.replacingOccurrences(of: "env: SECRET", with: "env: PWD_SECRET")
                            }
                        ),
                    ], store: Self.store(server))
                let hosts = try Self.hosts(
                    3, config: config, stack: stack, server: server, extra: ["SEED": seed, "PWD_SECRET": "pwd-secret"])
                let statuses = try await Self.storm(hosts, count: 50)
                #expect(statuses.count == 150)
                #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                #expect(try await stack.issuedCount(client: "svc") == 1)
                // A refresh-token profile keeps everything in its host's store.
                let seeded = try await hosts[0].call(
                    "request", ["path": "/whoami", "profile": "seeded"], timeout: .seconds(60))
                #expect(seeded["result"]?["status"]?.intValue == 200, "\(seeded.jsonText)")
                #expect(try await server.sql("SELECT count(*) FROM tokenrelay.tokens") == "1\n")
                #expect(try await server.sql("SELECT max(version) FROM tokenrelay.schema_version") == "1\n")
                let dump =
                    try await server.sql("SELECT * FROM tokenrelay.tokens")
                    + server.sql("SELECT encode(sealed, 'escape') FROM tokenrelay.tokens")
                    + server.sql("SELECT * FROM tokenrelay.schema_version")
                let forbidden =
                    try await stack.issuedValues() + [
                        "svc-secret", "pwd-secret", seed, Self.storeKey, server.password, stack.issuer, stack.rsURL,
                        stack.tokenURL, "interop", "service", "seeded", "svc",
                    ]
                for value in forbidden {
                    for encoded in Self.encodings(value) {
                        #expect(
                            !dump.contains(encoded),
                            "the tier's dump holds \(value.prefix(12))… as \(encoded.prefix(16))…")
                    }
                }
                let status = try await hosts[1].call("status")
                #expect(
                    status["result"]?["store"]?["shared"]?["state"]?.stringValue == "available",
                    "\(status.jsonText)\n\(hosts[1].stderrText.split(separator: "\n").filter { $0.contains("shared") }.prefix(5))"
                )
                try await Self.close(hosts, server: server)
            }
        }
    }

    @Test func shortLivedTokensAreIssuedOncePerLifetimeForTheFleet() async throws {
        try await PostgresServer.with { server in
            try await InteropStack.with(.init(accessTTL: 6)) { stack in
                let config = try stack.writeConfig(
                    profiles: [
                        (
                            "service",
                            stack.clientCredentials(client: "svc", secretVariable: "SECRET") + ["expiry_skew: 1s"]
                        )
                    ], store: Self.store(server))
                let hosts = try Self.hosts(3, config: config, stack: stack, server: server)
                let start = Date()
                var rounds = 0
                // The workload runs for a while of wall-clock time: lifetimes are what is measured.
                while Date().timeIntervalSince(start) < 20 {
                    let statuses = try await Self.storm(hosts, count: 3)
                    #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                    rounds += 1
                }
                let elapsed = Date().timeIntervalSince(start)
                let issued = try await stack.issuedCount(client: "svc")
                // A token is renewed 1 s before its 6 s lifetime ends: one per 5 s for the fleet.
                let lifetimes = Int((elapsed / 5).rounded(.up))
                print(
                    "fleet: 3 hosts, \(rounds) rounds over \(Int(elapsed)) s of 6 s tokens -> \(issued) tokens issued (\(lifetimes) lifetimes)"
                )
                #expect(issued <= lifetimes + 1, "\(issued) tokens for \(lifetimes) lifetimes")
                try await Self.close(hosts, server: server)
            }
        }
    }

    @Test func theRenewingHostKilledWhileItsTokenRequestIsHeldIsTakenOverOnce() async throws {
        try await PostgresServer.with { server in
            try await InteropStack.with(.init(tokenGate: true)) { stack in
                let config = try stack.writeConfig(
                    profiles: [("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET"))],
                    store: Self.store(server))
                let hosts = try Self.hosts(2, config: config, stack: stack, server: server)
                try stack.armTokenGate(grant: "client_credentials")
                try hosts[0].send(#"{"jsonrpc":"2.0","id":"held","method":"request","params":{"path":"/whoami"}}"#)
                try await stack.waitFor("the first host's token request at the gate") {
                    stack.arrivedAtTokenGate() == 1
                }
                // The held request stays held; nothing new is.
                try stack.disarmTokenGate()
                for id in 0..<3 {
                    try hosts[1].send(
                        #"{"jsonrpc":"2.0","id":"w\#(id)","method":"request","params":{"path":"/whoami"}}"#)
                }
                // The other host waits for the fleet's renewal lock while the holder lives...
                try await hosts[1].waitForStderr("waiting for the fleet's renewal lock")
                hosts[0].signal(SIGKILL)
                // ...and takes it over once the holder's connection drops with it.
                for id in 0..<3 {
                    let answer = try await hosts[1].answer(id: "w\(id)")
                    #expect(answer["result"]?["status"]?.intValue == 200, "\(answer.jsonText)")
                }
                #expect(hosts[1].stderrText.contains("took the fleet's renewal lock"))
                // One takeover: the other host's one token (the dead host's request is still held).
                #expect(try await stack.issuedCount(client: "svc") == 1)
                try stack.releaseTokenGate()
                try hosts[1].closeStdin()
                #expect(try await hosts[1].exitCode() == 0)
            }
        }
    }

    @Test func theTierStoppedNeverFailsARequestAndTheHostsShareAgainOnceItIsBack() async throws {
        try await PostgresServer.with { server in
            try await InteropStack.with { stack in
                let config = try stack.writeConfig(
                    profiles: [
                        ("service", stack.clientCredentials(client: "svc", secretVariable: "SECRET")),
                        ("later", stack.clientCredentials(client: "svc", secretVariable: "SECRET")),
                    ], store: Self.store(server))
                let hosts = try Self.hosts(3, config: config, stack: stack, server: server)
                #expect(try await Self.storm(hosts, count: 5).allSatisfy { $0 == 200 })
                #expect(try await stack.issuedCount(client: "svc") == 1)
                try await server.stop()
                for host in hosts {
                    _ = try await host.call("token-invalidate", ["profile": "service"])
                }
                let during = try await Self.storm(hosts, count: 5)
                #expect(during.allSatisfy { $0 == 200 }, "\(during)")
                for host in hosts {
                    let shared = try await host.call("status")["result"]?["store"]?["shared"]
                    #expect(shared?["state"]?.stringValue == "unavailable", "\(shared?.jsonText ?? "")")
                    #expect(shared?["since"]?.stringValue != nil)
                    #expect(host.stderrText.contains("the shared tier is unavailable"))
                }
                let alone = try await stack.issuedCount(client: "svc")
                #expect(alone == 4, "each host acted on its own")
                try await server.start()
                // Back: every host rejoins by itself (its listener reconnects), and a session none
                // of them used yet is fetched once for the fleet.
                for host in hosts {
                    try await stack.waitFor("the host to see the tier again") {
                        try await host.call("status")["result"]?["store"]?["shared"]?["state"]?.stringValue
                            == "available"
                    }
                }
                let again = try await Self.storm(hosts, count: 5, profile: "later")
                #expect(again.allSatisfy { $0 == 200 })
                #expect(try await stack.issuedCount(client: "svc") == alone + 1)
                try await Self.close(hosts, server: server)
            }
        }
    }

    @Test func anInvalidationOnOneHostIsSeenByTheOthersAndRecoveriesKeepTheNewerToken() async throws {
        try await PostgresServer.with { server in
            try await InteropStack.with { stack in
                let config = try stack.writeConfig(
                    profiles: [
                        (
                            "service",
                            stack.clientCredentials(client: "svc", secretVariable: "SECRET") + ["expose_token: true"]
                        )
                    ],
                    store: Self.store(server))
                let hosts = try Self.hosts(3, config: config, stack: stack, server: server)
                #expect(try await Self.storm(hosts, count: 2).allSatisfy { $0 == 200 })
                let first = try await stack.issuedValues(client: "svc", kind: "access")
                #expect(first.count == 1)
                _ = try await hosts[0].call("token-invalidate", ["profile": "service"])
                #expect(try await hosts[0].call("request", ["path": "/whoami"])["result"]?["status"]?.intValue == 200)
                let second = try await stack.issuedValues(client: "svc", kind: "access")
                #expect(second.count == 2)
                for host in hosts[1...] {
                    let token = try await host.call("token-get", ["profile": "service"])["result"]?[
                        "access_token"]?.stringValue
                    #expect(token == second.last, "another host still hands out the invalidated token")
                }
                #expect(try await stack.issuedCount(client: "svc") == 2)
                // The server revokes the fleet's token: every host's request meets a 401 and
                // recovers; whichever renews first, the others' recoveries find a newer token in the
                // tier and keep it (no host deletes it, so no third renewal happens).
                try await stack.revoke(second.last ?? "", hint: "access_token", client: "svc", secret: "svc-secret")
                let recovered = try await Self.storm(hosts, count: 1)
                #expect(recovered.allSatisfy { $0 == 200 }, "\(recovered)")
                #expect(try await stack.issuedCount(client: "svc") == 3)
                try await Self.close(hosts, server: server)
            }
        }
    }

    @Test func aNewerSchemaIsRefusedAndLeftAlone() async throws {
        try await PostgresServer.with { server in
            _ = try await server.sql(
                "CREATE SCHEMA tokenrelay AUTHORIZATION tr; CREATE TABLE tokenrelay.schema_version (version integer NOT NULL); "
                    + "INSERT INTO tokenrelay.schema_version VALUES (2); ALTER TABLE tokenrelay.schema_version OWNER TO tr"
            )
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "tr-fleet-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: directory) }
            let config = directory.appendingPathComponent("config.yaml")
            try """
            version: 1
            store: \(Self.store(server))
            default_environment: e
            environments:
              e:
                base_url: http://127.0.0.1:9
                default_profile: p
                profiles:
                  p: {type: client_credentials, token_url: "http://127.0.0.1:9/token", client_id: x, client_secret: {env: SECRET}}
            """.write(to: config, atomically: true, encoding: .utf8)
            let host = try RelayProcess(
                ["--config", config.path, "--log-level", "debug"],
                environment: [
                    "SECRET": "svc-secret", "XDG_STATE_HOME": directory.path, "TR_STORE_KEY": Self.storeKey,
                    "TR_PG_PASSWORD": server.password,
                ], testMethods: false)
            // The token endpoint is unreachable: the request fails for that reason, not the tier's.
            let answer = try await host.call("request", ["path": "/x"])
            #expect(answer["error"]?["data"]?["kind"]?.stringValue == "transport", "\(answer.jsonText)")
            let shared = try await host.call("status")["result"]?["store"]?["shared"]
            #expect(shared?["state"]?.stringValue == "unavailable", "\(shared?.jsonText ?? "")")
            #expect(host.stderrText.contains("newer than this tokenrelay knows"))
            #expect(try await server.sql("SELECT version FROM tokenrelay.schema_version") == "2\n")
            #expect(try await server.sql("SELECT to_regclass('tokenrelay.tokens') IS NULL") == "t\n")
            try host.closeStdin()
            #expect(try await host.exitCode() == 0)
        }
    }
}
