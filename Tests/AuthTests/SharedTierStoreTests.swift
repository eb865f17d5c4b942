import Foundation
import Synchronization
import Testing

@testable import TokenRelayAuth

/// A shared tier in memory (one layer's fake), or one that always fails.
final class FakeSharedTier: SharedTokenTier {
    let rows = Mutex<[[UInt8]: SharedRow]>([:])
    let failing: Bool

    init(failing: Bool = false) { self.failing = failing }

    var info: SharedTierInfo { SharedTierInfo(type: "fake", state: failing ? "unavailable" : "available") }
    func changedElsewhere() -> Bool { false }

    func read(_ id: [UInt8]) async throws -> SharedRow? {
        if failing { throw SharedTierUnavailable("down") }
        return rows.withLock { $0[id] }
    }

    func publish(_ row: SharedRow) async throws {
        if failing { throw SharedTierUnavailable("down") }
        rows.withLock { $0[row.id] = row }
    }

    func delete(_ id: [UInt8], ifSealed sealed: [UInt8]) async throws -> Bool {
        if failing { throw SharedTierUnavailable("down") }
        return rows.withLock { rows in
            guard rows[id]?.sealed == sealed else { return false }
            rows[id] = nil
            return true
        }
    }

    func delete(_ id: [UInt8]) async throws {
        if failing { throw SharedTierUnavailable("down") }
        _ = rows.withLock { $0.removeValue(forKey: id) }
    }

    func lock(_ id: [UInt8], deadline: Date) async throws -> (any SharedRenewalLock)? {
        if failing { throw SharedTierUnavailable("down") }
        return nil
    }
}

@Suite struct SharedTierStoreTests {
    static func tokens(_ value: String, expiresIn: TimeInterval = 3600) -> StoredTokens {
        StoredTokens(accessToken: value, receivedAt: Date(), expiresAt: Date().addingTimeInterval(expiresIn))
    }

    @Test func aTokenCommittedOnOneHostIsReadByAnotherAndSealed() async throws {
        let tier = FakeSharedTier()
        let one = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let two = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await one.save(Self.tokens("at-canary-shared-1"), for: key)
        #expect(try await two.load(key)?.accessToken == "at-canary-shared-1")
        let row = try #require(tier.rows.withLock { $0.values.first })
        #expect(!String(decoding: row.sealed, as: UTF8.self).contains("at-canary"))
        #expect(row.id.count == 32)
    }

    @Test func aRecoveryOnAnOlderTokenNeverDeletesTheNewerOne() async throws {
        let tier = FakeSharedTier()
        let stale = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let fresh = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await stale.save(Self.tokens("at-old"), for: key)
        let oldRevision = try #require(try await stale.load(key)?.revision)
        // Another host renews: the tier now holds a newer token the stale host has not read.
        _ = try await fresh.save(Self.tokens("at-new", expiresIn: 7200), for: key)
        // The stale host's 401 on its old token: recorded at home, the newer row kept.
        #expect(try await stale.recordInvalidation(key, revision: oldRevision))
        #expect(tier.rows.withLock { $0.count } == 1)
        #expect(try await fresh.load(key)?.accessToken == "at-new")
        // ...and the stale host then reads the newer token instead of renewing.
        #expect(try await stale.load(key)?.accessToken == "at-new")
    }

    @Test func aRecoveryOnTheCurrentTokenDeletesItForTheFleet() async throws {
        let tier = FakeSharedTier()
        let store = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await store.save(Self.tokens("at-rejected"), for: key)
        let revision = try #require(try await store.load(key)?.revision)
        #expect(try await store.recordInvalidation(key, revision: revision))
        #expect(tier.rows.withLock { $0.isEmpty })
    }

    @Test func logoutRemovesTheRowAndAnotherHostThenRenews() async throws {
        let tier = FakeSharedTier()
        let one = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let two = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await one.save(Self.tokens("at-before-logout"), for: key)
        #expect(try await two.load(key)?.accessToken == "at-before-logout")
        try await one.logOut(key)
        #expect(tier.rows.withLock { $0.isEmpty })
        // The other host held the token it last saw in the tier: gone there, so it is invalidated.
        #expect(try await two.load(key)?.invalidated == true)
    }

    @Test func refreshTokenSessionsAndBoundTokensNeverReachTheTier() async throws {
        let tier = FakeSharedTier()
        let store = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let seeded = StoreKey(session: sessionKey("seeded"), seedFingerprint: String(repeating: "0", count: 64))
        _ = try await store.save(sampleTokens(), for: seeded)
        var bound = Self.tokens("at-dpop")
        bound.tokenType = "DPoP"
        _ = try await store.save(bound, for: StoreKey(session: sessionKey()))
        #expect(tier.rows.withLock { $0.isEmpty })
    }

    /// SPEC §11: machine identities are shared (client credentials, jwt-bearer, an exchange of
    /// their tokens); a person's session, a refresh token, an exchange of either, and an exchange
    /// of a secret source's token never are (another host could act as another principal).
    @Test func machineIdentitiesAreSharedAndExchangesOfAPersonsTokenAreNot() async throws {
        func key(
            _ profile: String, _ grant: Grant, dpop: Bool = false, clientAuth: ClientAuthMethod = .clientSecretBasic
        ) -> SessionKey {
            SessionKey(
                environment: "dev", profile: profile,
                configuration: OAuthClientConfiguration(
                    tokenURL: "https://as.example/token", clientID: "svc", clientAuth: clientAuth, grant: grant,
                    dpop: dpop))
        }
        let machineConfiguration = OAuthClientConfiguration(
            tokenURL: "https://as.example/token", clientID: "svc", grant: .clientCredentials)
        let machine = SessionKey(environment: "dev", profile: "svc", configuration: machineConfiguration)
        let idJAG = OAuthClientConfiguration(
            tokenURL: "https://idp.example/token", clientID: "svc",
            grant: .tokenExchange(TokenExchange(subject: .secret(keyProvider("id-token"), description: "env"))))
        let person = key("me", .interactive(InteractiveLogin(flow: .deviceCode)))
        let secret = TokenExchange.Source.secret(keyProvider("subject"), description: "env")
        let shared: [SessionKey] = [
            machine, key("ci", .jwtBearer(.secret(keyProvider("jwt")))),
            key("x1", .tokenExchange(TokenExchange(subject: .session(machine)))),
            key("x2", .tokenExchange(TokenExchange(subject: .session(machine), actor: .session(machine)))),
            // An assertion that is a machine's token (SPEC §10 `assertion: { profile }`).
            key("a1", .jwtBearer(.session(environment: "dev", profile: "svc", configuration: machineConfiguration))),
        ]
        let hostOnly: [SessionKey] = [
            person, key("seeded", .refreshToken(seed: keyProvider("rt"))),
            key("x3", .tokenExchange(TokenExchange(subject: .session(person)))),
            key("x4", .tokenExchange(TokenExchange(subject: .session(machine), actor: .session(person)))),
            // A secret source's token: whose it is cannot be told from the key.
            key("x5", .tokenExchange(TokenExchange(subject: secret))),
            // An ID-JAG for a person's ID token (SPEC §9.9), from a login or a secret source.
            key("x6", .tokenExchange(TokenExchange(subject: .sessionIDToken(person)))),
            key("a2", .jwtBearer(.session(environment: "dev", profile: "idp", configuration: idJAG))),
            // Bound to what only this host holds (SPEC §11): a DPoP key, a client certificate.
            key("dpop", .clientCredentials, dpop: true), key("mtls", .clientCredentials, clientAuth: .tlsClientAuth),
        ]
        for session in shared + hostOnly {
            let tier = FakeSharedTier()
            let store = SharedTierStore(
                host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
            _ = try await store.save(Self.tokens("at-\(session.profile)"), for: StoreKey(session: session))
            let published = tier.rows.withLock { !$0.isEmpty }
            #expect(published == shared.contains(session), "\(session.profile)")
        }
    }

    @Test func aFailingTierLeavesTheHostsStoreWorking() async throws {
        let store = SharedTierStore(
            host: InMemoryTokenStore(), tier: FakeSharedTier(failing: true), encryptionKey: keyProvider(storeTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await store.save(Self.tokens("at-alone"), for: key)
        #expect(try await store.load(key)?.accessToken == "at-alone")
        let lease = try await store.acquireLease(
            key, purpose: .renewal, deadline: Date().addingTimeInterval(5), expiresAt: Date().addingTimeInterval(60))
        store.releaseLease(lease)
        #expect(try await store.recordInvalidation(key, revision: nil))
        try await store.logOut(key)
    }

    @Test func aRowSealedUnderAnotherKeyIsIgnored() async throws {
        let tier = FakeSharedTier()
        let one = SharedTierStore(host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(storeTestKey))
        let other = SharedTierStore(
            host: InMemoryTokenStore(), tier: tier, encryptionKey: keyProvider(otherStoreTestKey))
        let key = StoreKey(session: sessionKey())
        _ = try await one.save(Self.tokens("at-one"), for: key)
        #expect(try await other.load(key) == nil)
    }

    @Test func thePayloadRoundTripsAndRejectsAnythingElse() {
        let payload = SharedTokenPayload(
            accessToken: "a;b:c-", tokenType: "Bearer", scope: nil, receivedAt: Date(timeIntervalSince1970: 5),
            expiresAt: Date(timeIntervalSince1970: 10))
        #expect(SharedTokenPayload(encoded: payload.encoded) == payload)
        #expect(SharedTokenPayload(encoded: Array("tokenrelay-shared-v1;99:x;".utf8)) == nil)
        #expect(SharedTokenPayload(encoded: []) == nil)
    }
}

/// The PostgreSQL tier against a server that accepts connections and never answers.
@Suite struct PostgresSharedTierTimeoutTests {
    /// A loopback listener that never accepts: the kernel completes connections into its backlog,
    /// and nothing ever answers them.
    static func silentListener() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(descriptor, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    @Test func aTierSlowerThanItsTimeoutIsReportedUnavailableWithinTheBound() async throws {
        let (descriptor, port) = try Self.silentListener()
        defer { close(descriptor) }
        let tier = PostgresSharedTier(
            configuration: PostgresTierConfiguration(
                url: "postgresql://tr@127.0.0.1:\(port)/tokens?sslmode=disable", password: .value("pg-canary-pw-41"),
                timeout: .milliseconds(300)))
        await #expect(throws: SharedTierUnavailable.self) { try await tier.read(Array(repeating: 1, count: 32)) }
        #expect(tier.info.state == "unavailable")
        #expect(tier.info.since != nil)
        // Skipped at once while it fails (no second wait).
        await #expect(throws: SharedTierUnavailable.self) { try await tier.read(Array(repeating: 1, count: 32)) }
    }
}
