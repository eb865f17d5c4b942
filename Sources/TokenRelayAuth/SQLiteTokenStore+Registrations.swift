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
    static func sealingID(_ issuer: String) -> String { "registration:" + issuer }

    public func loadRegistration(issuer: String) async throws -> ClientRegistration? {
        let path = self.path
        return try await withConnection { opened in
            let rows = try opened.connection.query(
                "SELECT payload, sealed FROM registrations WHERE issuer = ?1", [.text(issuer)])
            guard let row = rows.first, let payload = row[0].blobValue else { return nil }
            // As for sessions (issue 34, finding 1): with a key, the record must open under it,
            // whatever its `sealed` column says (anyone who can write the file can change that).
            let plain: [UInt8]
            if let cipher = opened.cipher {
                guard let unsealed = cipher.open(payload, associatedData: Array(Self.sealingID(issuer).utf8)) else {
                    try self.checkKeyIsCurrent(&opened)
                    throw AuthError.storage(
                        "a client registration in the store \(path) does not open under the store's key "
                            + "(tampered or corrupted); it was not used")
                }
                plain = unsealed
            } else if row[1].integerValue == 1 {
                throw AuthError.store("the store \(path) is encrypted; configure store.encryption_key")
            } else {
                plain = payload
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
            // Sealed inside the write transaction, after checking the store's key is still the
            // one this process holds (a `store rekey` elsewhere: refused, nothing written).
            let connection = opened.connection
            try connection.execute("BEGIN IMMEDIATE")
            do {
                try self.checkKeyIsCurrent(&opened)
                let (stored, sealed) = try self.seal(plain, id: Self.sealingID(issuer), cipher: opened.cipher)
                try connection.query(
                    """
                    INSERT OR REPLACE INTO registrations (issuer, payload, sealed, updated_at) VALUES (?1, ?2, ?3, ?4)
                    """,
                    [.text(issuer), .blob(stored), .integer(sealed ? 1 : 0), .real(Date().timeIntervalSince1970)])
                try connection.execute("COMMIT")
            } catch {
                try? connection.execute("ROLLBACK")
                throw error
            }
        }
    }

    public func removeRegistration(issuer: String) async throws {
        _ = try await withConnection { opened in
            try opened.connection.query("DELETE FROM registrations WHERE issuer = ?1", [.text(issuer)])
        }
    }
}
