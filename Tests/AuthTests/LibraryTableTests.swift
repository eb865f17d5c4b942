import CCrypto
import CCurl
import CSQLite
import Testing
import TokenRelayHTTP

@testable import TokenRelayAuth

/// The C shims' tables are one per process: a library that the code of one module loaded is
/// loaded for every other copy of the shim's functions too (this file's among them, which never
/// asks for a load), so no copy calls `dlopen` again. Copies with tables of their own each did,
/// and each of those waited for the dynamic loader's lock while another thread's `dlopen` ran
/// (Sources/CCurl/shim.h).
@Suite struct LibraryTableTests {
    @Test func libcryptoLoadedByAuthIsLoadedHere() {
        _ = LibCrypto.sha256(Array("abc".utf8))
        #expect(tr_crypto_table().pointee.loaded == 1)
    }

    @Test func libsqlite3LoadedByTheStoreIsLoadedHere() async throws {
        let directory = try StoreDirectory()
        let store = SQLiteTokenStore(path: directory.database)
        try await store.open()
        #expect(tr_sqlite_table().pointee.loaded == 1)
    }

    @Test func libcurlLoadedByATransportIsLoadedHere() throws {
        let transport = try CurlTransport()
        transport.shutdown()
        #expect(tr_curl_table().pointee.loaded == 1)
    }
}
