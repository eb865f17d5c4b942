import FoundationEssentials

/// Client registrations (SPEC §9.4): one sealed record per issuer, shared by every process of
/// the store.
extension SQLiteTokenStore {
    /// The schema step that adds the registrations table.
    static let registrationsMigration = """
        CREATE TABLE registrations (issuer TEXT PRIMARY KEY, payload BLOB NOT NULL, sealed INTEGER NOT NULL,
            updated_at REAL NOT NULL);
        """

    /// The associated data a registration is sealed with (binds the record to its issuer).
    private static func sealingID(_ issuer: String) -> String { "registration:" + issuer }

    public func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        let path = self.path
        return try await withConnection { opened in
            let rows = try opened.connection.query(
                "SELECT payload, sealed FROM registrations WHERE issuer = ?1", [.text(issuer)])
            guard let row = rows.first, let payload = row[0].blobValue else { return nil }
            var plain = payload
            if row[1].integerValue == 1 {
                guard let cipher = opened.cipher else {
                    throw AuthError.store("the store \(path) is encrypted; configure store.encryption_key")
                }
                guard let unsealed = cipher.open(payload, associatedData: Array(Self.sealingID(issuer).utf8)) else {
                    throw AuthError.storage("a client registration in the store \(path) failed its integrity check")
                }
                plain = unsealed
            }
            guard let registration = ClientRegistration(json: plain), registration.issuer == issuer else {
                throw AuthError.storage("a client registration in the store \(path) is not readable")
            }
            return registration
        }
    }

    public func saveRegistration(_ registration: ClientRegistration) async throws {
        let plain = registration.json
        let issuer = registration.issuer
        _ = try await withConnection { opened in
            let (stored, sealed) = try self.seal(plain, id: Self.sealingID(issuer), cipher: opened.cipher)
            try opened.connection.query(
                """
                INSERT OR REPLACE INTO registrations (issuer, payload, sealed, updated_at) VALUES (?1, ?2, ?3, ?4)
                """,
                [.text(issuer), .blob(stored), .integer(sealed ? 1 : 0), .real(Date().timeIntervalSince1970)])
        }
    }

    public func removeRegistration(issuer: String) async throws {
        _ = try await withConnection { opened in
            try opened.connection.query("DELETE FROM registrations WHERE issuer = ?1", [.text(issuer)])
        }
    }
}
