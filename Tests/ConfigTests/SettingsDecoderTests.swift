import Foundation
import TestSupport
import Testing

@testable import TokenRelayConfig

@Suite struct SettingsDecoderTests {
    static let fullConfig = """
        version: 1
        default_environment: staging
        server:
          max_concurrent_requests: 128
          max_queued_requests: 500
          max_message_bytes: 8MiB
        store:
          type: memory
        environments:
          staging:
            base_url: https://api.staging.example.com/v1
            default_profile: service
            headers: { User-Agent: my-tool/1.0, X-Trace: "on" }
            timeout: 20s
            connect_timeout: 500ms
            allowed_origins: [https://files.example.com:8443, "http://LOCALHOST:80/"]
            ca_file: ~/ca.pem
            proxy: http://proxy.local:3128
            max_response_bytes: 1MB
            events: { idle_timeout: 1m, max_backoff: 2m }
            profiles:
              service:
                type: client_credentials
                issuer: https://auth.example.com
                token_url: https://auth.example.com/token
                client_id: my-service
                client_secret: { env: SECRET }
                client_auth: client_secret_post
                scopes: [read, write]
                audience: https://api.example.com
                resource: https://api.example.com
                expiry_skew: 1m
                expose_token: true
              seeded:
                type: refresh_token
                token_url: https://auth.example.com/token
                client_id: cli
                refresh_token: { file: seed.txt }
                scopes: "openid offline_access"
                resource: [https://a.example.com, https://b.example.com]
              me:
                type: authorization_code
                issuer: https://auth.example.com
                client_id: public-client
                authorization_url: https://auth.example.com/authorize
                redirect: { port: [8765, 0], path: /cb }
                open_browser: [firefox, --new-tab]
                login_timeout: 2m
                parameters:
                  authorization: { prompt: consent, login_hint: alice }
                  token: { resource_hint: x }
              tv:
                type: device_code
                issuer: https://auth.example.com
                client_id: tv-client
                device_authorization_url: https://auth.example.com/device
              workload:
                type: jwt_bearer
                issuer: https://auth.example.com
                client_id: workload
                assertion: { file: sa-token }
              exchanged:
                type: token_exchange
                issuer: https://auth.example.com
                client_id: my-service
                subject: { profile: service }
                audience: https://downstream.example.com
              key:
                type: api_key
                query: api_key
                value: { command: [pass, show, key], timeout: 2s }
              login:
                type: basic
                username: alice
                password: { env: PASSWORD }
              static:
                type: bearer
                token: { command: [token-helper] }
                cache: 5m
          local:
            base_url: http://127.0.0.1:8080
        """

    @Test func everyKeyOfEveryProfileTypeDecodes() async throws {
        let files = InMemoryFileSystem(["/home/u/ca.pem": "x", "/cfg/seed.txt": "seed"])
        let result = await decodeConfig(Self.fullConfig, mode: .check(resolveSecrets: false), files: files)
        #expect(!result.hasErrors, "\(result.diagnostics)")
        let settings = try #require(result.settings)
        #expect(settings.defaultEnvironment == "staging")
        #expect(
            settings.server
                == ServerSettings(maxConcurrentRequests: 128, maxQueuedRequests: 500, maxMessageBytes: 8 * 1024 * 1024))
        #expect(settings.environments.map(\.name) == ["staging", "local"])
        let staging = try #require(settings.environment(named: "staging"))
        #expect(staging.baseURL == "https://api.staging.example.com/v1")
        #expect(staging.headers.map(\.name) == ["User-Agent", "X-Trace"])
        #expect(staging.headers.map(\.value) == ["my-tool/1.0", "on"])
        #expect(staging.timeout == .seconds(20))
        #expect(staging.connectTimeout == .milliseconds(500))
        // As written: libcurl's parser computes the origins at run time.
        #expect(staging.allowedOrigins == ["https://files.example.com:8443", "http://LOCALHOST:80/"])
        #expect(staging.caFile == "/home/u/ca.pem")
        #expect(staging.proxy == "http://proxy.local:3128")
        #expect(staging.maxResponseBytes == 1_000_000)
        #expect(staging.events == EventsSettings(idleTimeout: .seconds(60), maxBackoff: .seconds(120)))
        #expect(
            staging.profiles.map(\.name) == [
                "service", "seeded", "me", "tv", "workload", "exchanged", "key", "login", "static",
            ])
        #expect(staging.profiles.map(\.typeName) == SettingsDecoder.profileTypes)

        let service = try #require(staging.profile(named: "service"))
        #expect(service.exposeToken)
        guard case .clientCredentials(let client) = service.kind else { Issue.record("wrong kind"); return }
        #expect(client.issuer == "https://auth.example.com")
        #expect(client.tokenURL == "https://auth.example.com/token")
        #expect(client.clientID == "my-service")
        #expect(client.clientSecret?.origin == .environment(name: "SECRET"))
        #expect(client.clientAuth == .clientSecretPost)
        #expect(client.scopes == ["read", "write"])
        #expect(client.audience == "https://api.example.com")
        #expect(client.resource == ["https://api.example.com"])
        #expect(client.expirySkew == .seconds(60))

        guard case .refreshToken(let seeded, let seed) = staging.profile(named: "seeded")?.kind else {
            Issue.record("seeded"); return
        }
        #expect(seed.origin == .file(path: "/cfg/seed.txt"))
        #expect(seeded.scopes == ["openid", "offline_access"])
        #expect(seeded.resource.count == 2)
        #expect(seeded.clientAuth == ClientAuthMethod.none)
        #expect(seeded.expirySkew == .seconds(30))

        guard case .authorizationCode(_, let login) = staging.profile(named: "me")?.kind else {
            Issue.record("me"); return
        }
        #expect(login.authorizationURL == "https://auth.example.com/authorize")
        #expect(login.redirectPorts == [8765, 0])
        #expect(login.redirectPath == "/cb")
        #expect(login.openBrowser == .command(["firefox", "--new-tab"]))
        #expect(login.loginTimeout == .seconds(120))
        #expect(login.authorizationParameters.map { "\($0.0)=\($0.1)" } == ["prompt=consent", "login_hint=alice"])
        #expect(login.tokenParameters.map { "\($0.0)=\($0.1)" } == ["resource_hint=x"])
        guard case .deviceCode(_, let device) = staging.profile(named: "tv")?.kind else {
            Issue.record("tv"); return
        }
        #expect(device.deviceAuthorizationURL == "https://auth.example.com/device")
        #expect(device.redirectPorts == [0])
        #expect(device.openBrowser == .off)
        #expect(device.loginTimeout == .seconds(300))
        guard case .apiKey(let placement, let value) = staging.profile(named: "key")?.kind else {
            Issue.record("key"); return
        }
        #expect(placement == .query("api_key"))
        #expect(value.origin == .command(argv: ["pass", "show", "key"], timeout: .seconds(2)))
        guard case .basic(let username, let password) = staging.profile(named: "login")?.kind else {
            Issue.record("login"); return
        }
        #expect(username == "alice")
        #expect(password.origin == .environment(name: "PASSWORD"))
        guard case .bearer(let token, let cache) = staging.profile(named: "static")?.kind else {
            Issue.record("static"); return
        }
        #expect(token.origin == .command(argv: ["token-helper"], timeout: .seconds(10)))
        #expect(cache == .seconds(300))

        let local = try #require(settings.environment(named: "local"))
        #expect(local.timeout == .seconds(30))
        #expect(local.connectTimeout == .seconds(10))
        #expect(local.maxResponseBytes == 32 * 1024 * 1024)
        #expect(local.events == EventsSettings())
        // Interactive types are served now: nothing announces them as missing.
        #expect(!result.diagnostics.contains { $0.message.contains("not implement") })
        // A refresh_token profile on a memory store is warned about.
        #expect(result.warnings.contains { $0.message.contains("'seeded'") && $0.message.contains("memory") })
    }

    @Test func interactiveProfilesAreServedWithLoginDefaults() async throws {
        let result = await decodeConfig(profileConfig("type: device_code\nissuer: https://a.example.com\nclient_id: x"))
        #expect(result.errors.isEmpty)
        guard case .deviceCode(let client, let login)? = result.settings?.environments.first?.profiles.first?.kind
        else {
            Issue.record("\(result.diagnostics)")
            return
        }
        #expect(client.clientAuth == .none)
        #expect(login.loginTimeout == .seconds(300))
        #expect(login.openBrowser == .off)
        #expect(login.redirectPath == "/callback")
    }

    @Test func sqliteStoreTakesItsPathAndKeySource() async throws {
        let yaml = "version: 1\nstore:\n  type: sqlite\n  path: ~/tokens.db\n  encryption_key: { env: STORE_KEY }\n"
        let served = await decodeConfig(yaml)
        #expect(!served.hasErrors)
        #expect(served.settings?.store.path == "/home/u/tokens.db")
        #expect(served.settings?.store.encryptionKey?.origin == .environment(name: "STORE_KEY"))
    }

    @Test func checkingWarnsWhenTokensWouldBeStoredInPlainText() async throws {
        let plain = await decodeConfig(
            profileConfig("type: client_credentials\ntoken_url: https://a.example.com/t\nclient_id: x"),
            mode: .check(resolveSecrets: false))
        #expect(
            plain.warnings.contains { $0.message.contains("kept in plain text in its 0600 file where there is none") })
        let memory = await decodeConfig(
            "store: { type: memory }\n"
                + profileConfig("type: client_credentials\ntoken_url: https://a.example.com/t\nclient_id: x"),
            mode: .check(resolveSecrets: false))
        #expect(!memory.warnings.contains { $0.message.contains("plain text") })
    }

    @Test func clientAuthDefaultsFollowTheSecret() async throws {
        let withSecret = await decodeConfig(
            profileConfig(
                "type: client_credentials\ntoken_url: https://a.example.com/t\nclient_id: x\nclient_secret: { env: S }")
        )
        guard case .clientCredentials(let client)? = withSecret.settings?.environments.first?.profiles.first?.kind
        else {
            Issue.record("\(withSecret.diagnostics)")
            return
        }
        #expect(client.clientAuth == .clientSecretBasic)
    }

    @Test func minimalConfigGetsDefaults() async throws {
        let result = await decodeConfig("version: 1\n")
        let settings = try #require(result.settings)
        #expect(result.diagnostics.isEmpty)
        #expect(settings.environments.isEmpty)
        #expect(settings.store == StoreSettings(type: .sqlite, path: "/home/u/.local/state/tokenrelay/sessions.db"))
        #expect(
            settings.server
                == ServerSettings(maxConcurrentRequests: 256, maxQueuedRequests: 10_000, maxMessageBytes: 64 << 20))
    }

    @Test func anchorsAndMergeKeysShareProfileSettings() async throws {
        let yaml = """
            version: 1
            environments:
              a: &env
                base_url: https://a.example.com
                timeout: 5s
                profiles:
                  key: { type: api_key, header: X-Key, value: { env: KEY } }
              b:
                <<: *env
                base_url: https://b.example.com
            """
        let result = await decodeConfig(yaml)
        let settings = try #require(result.settings, "\(result.diagnostics)")
        #expect(settings.environment(named: "b")?.baseURL == "https://b.example.com")
        #expect(settings.environment(named: "b")?.timeout == .seconds(5))
        #expect(settings.environment(named: "b")?.profile(named: "key")?.typeName == "api_key")
    }

    @Test func topLevelExtensionKeysHoldAnchorsAndAreIgnored() async throws {
        let yaml = """
            version: 1
            x-timeouts: &timeouts { timeout: 7s, connect_timeout: 2s }
            environments:
              e:
                <<: *timeouts
                base_url: https://e.example.com
                x-note: not allowed here
            """
        let result = await decodeConfig(yaml)
        #expect(result.errors.map(\.line) == [7])
        let checked = await decodeConfig(yaml.replacingOccurrences(of: "    x-note: not allowed here", with: ""))
        let environment = try #require(checked.settings?.environments.first, "\(checked.diagnostics)")
        #expect(environment.timeout == .seconds(7))
        #expect(environment.connectTimeout == .seconds(2))
    }

    @Test func multipleErrorsAreReportedTogetherInFileOrder() async {
        let yaml = """
            version: 1
            environments:
              e:
                base_url: ftp://nope
                timeout: forever
                profiles:
                  p: { type: api_key, header: X-Key, value: { env: K }, extra: 1 }
            server:
              max_concurrent_requests: many
            """
        let result = await decodeConfig(yaml)
        #expect(result.settings == nil)
        #expect(result.errors.map(\.line) == [4, 5, 7, 9])
        #expect(result.errors.allSatisfy { $0.file == testConfigPath })
    }
}

@Suite struct SettingsDecoderFieldsTests {
    /// A login's parameters are the file's own names: past `Fields.scanLimit` of them the
    /// look-ups go through an index. Every parameter is kept once, in file order, and a
    /// duplicate is reported with the line of the first.
    @Test func manyParametersKeepTheirOrderAndADuplicateNamesTheFirstLine() async throws {
        let count = SettingsDecoder.Fields.scanLimit * 2 + 3
        func config(extra: String) -> String {
            let lines = (0..<count).map { "            p\($0): v\($0)" }.joined(separator: "\n")
            return """
                version: 1
                environments:
                  e:
                    base_url: https://api.example.com
                    profiles:
                      me:
                        type: authorization_code
                        issuer: https://auth.example.com
                        client_id: public-client
                        parameters:
                          authorization:
                \(lines)\(extra)
                """
        }
        let valid = await decodeConfig(config(extra: ""))
        let settings = try #require(valid.settings)
        guard case .authorizationCode(_, let login) = settings.environments.first?.profile(named: "me")?.kind else {
            Issue.record("me")
            return
        }
        #expect(login.authorizationParameters.map(\.0) == (0..<count).map { "p\($0)" })
        #expect(login.authorizationParameters.last?.1 == "v\(count - 1)")

        let duplicated = await decodeConfig(config(extra: "\n            p3: again"))
        #expect(duplicated.settings == nil)
        let error = try #require(duplicated.errors.first)
        #expect(error.message.contains("duplicate key 'p3'"))
        #expect(error.message.contains("first at line 15"))
        #expect(duplicated.errors.count == 1)
    }

    @Test func aLookUpFindsTheFirstPairOfAKeyOnEitherSideOfTheLimit() throws {
        let root = try #require(try YAMLParser().parse("k: first\nk2: x\n"))
        let pairs = try #require(root.pairs)
        for total in [3, SettingsDecoder.Fields.scanLimit + 5] {
            var fields = SettingsDecoder.Fields()
            fields.append("k", pairs[0])
            for index in 0..<total { fields.append("key\(index)", pairs[1]) }
            fields.append("k", pairs[1])
            #expect(fields["k"]?.value.scalar?.value == "first")
            #expect(fields["key\(total - 1)"]?.value.scalar?.value == "x")
            #expect(fields["absent"] == nil)
        }
    }
}

/// `store.shared` (SPEC §11).
@Suite struct SharedTierSettingsTests {
    static func config(_ shared: String, key: Bool = true) -> String {
        "version: 1\nstore:\n  type: sqlite\n" + (key ? "  encryption_key: { env: STORE_KEY }\n" : "")
            + "  shared: \(shared)\n"
    }

    @Test func aSharedTierTakesItsURLPasswordTimeoutAndSchema() async throws {
        let result = await decodeConfig(
            Self.config(
                "{type: postgres, url: \"postgresql://tr@127.0.0.1:5432/tokens\", password: {env: PGPW}, timeout: 3s, schema: fleet_a}"
            ))
        #expect(!result.hasErrors, "\(result.diagnostics)")
        let shared = result.settings?.store.shared
        #expect(shared?.url == "postgresql://tr@127.0.0.1:5432/tokens")
        #expect(shared?.password?.origin == .environment(name: "PGPW"))
        #expect(shared?.timeout == .seconds(3))
        #expect(shared?.schema == "fleet_a")
    }

    @Test func aSharedTierWithoutTheStoreKeyIsAnError() async throws {
        let result = await decodeConfig(
            Self.config("{type: postgres, url: \"postgresql://tr@127.0.0.1/tokens\"}", key: false))
        #expect(result.diagnostics.contains { $0.message.contains("needs 'store.encryption_key'") })
        #expect(result.hasErrors)
    }

    @Test func aPasswordInTheURLOrABadSchemaIsAnError() async throws {
        let password = await decodeConfig(Self.config("{type: postgres, url: \"postgresql://tr:hunter22@db/tokens\"}"))
        #expect(password.hasErrors)
        #expect(!password.diagnostics.contains { $0.message.contains("hunter22") })
        let schema = await decodeConfig(
            Self.config("{type: postgres, url: \"postgresql://tr@db/tokens\", schema: \"x; drop\"}"))
        #expect(schema.hasErrors)
    }

    @Test(arguments: [
        ("postgresql://tr@db.internal/tokens", true),
        ("postgresql://tr@db.internal/tokens?sslmode=require", true),
        ("postgresql://tr@db.internal/tokens?sslmode=verify-ca", true),
        ("postgresql://tr@db.internal/tokens?sslmode=verify-full", false),
        ("postgresql://tr@127.0.0.1:5432/tokens", false),
        ("postgresql://tr@[::1]/tokens?sslmode=disable", false),
        ("postgresql:///tokens?host=/run/postgresql", false),
        ("postgresql://tr@localhost/tokens?host=db.internal", true),
    ])
    func checkingWarnsAboutAnUnverifiedRemoteServer(url: String, warns: Bool) async throws {
        let result = await decodeConfig(
            Self.config("{type: postgres, url: \"\(url)\"}"), mode: .check(resolveSecrets: false))
        #expect(!result.hasErrors, "\(result.diagnostics)")
        #expect(result.warnings.contains { $0.message.contains("sslmode") } == warns, "\(result.warnings)")
    }
}
