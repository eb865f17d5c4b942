import CSecret
import FoundationEssentials
import Glibc
import TokenRelayLogging

/// The freedesktop Secret Service (D-Bus `org.freedesktop.secrets`: GNOME Keyring, KeePassXC,
/// KWallet) holding one store key per store (SPEC §5.6): an item of the default collection whose
/// attributes are `application: tokenrelay` and `store: <the store's absolute path>`, its value
/// the key as base64 text (so `secret-tool lookup application tokenrelay store PATH` prints a key
/// `store.encryption_key` can take elsewhere).
///
/// Reached through libsecret, loaded on first use (Sources/CSecret/shim.h), and only by a process
/// that opens a store. Never prompts: a locked collection or item is reported, not unlocked. Every
/// call blocks (D-Bus round trips): it runs on the store's own thread.
public enum SecretServiceKeyring {
    /// The `application` attribute of tokenrelay's items.
    public static let application = "tokenrelay"

    /// What the secret service answered.
    public enum Answer: Sendable, Equatable {
        /// The item's value (the key's text).
        case key(String)
        /// Created, or removed.
        case done
        /// No item names this store.
        case absent
        /// No secret service here; why ("no session bus: DBUS_SESSION_BUS_ADDRESS is not set", …).
        case unreachable(String)
        /// The item, or the default collection a new item would go to, is locked (unlocking it
        /// needs a person: tokenrelay never prompts).
        case locked
        /// More than one item names this store.
        case several
        /// Anything else (what the service said).
        case failed(String)
    }

    /// The item that holds `store`'s key, in the words the messages use.
    public static func itemDescription(_ store: String) -> String {
        "the secret service's item application=\(application) store=\(store)"
    }

    /// Why the secret service cannot be reached before any library is loaded: no session bus
    /// (GLib would otherwise try to start one), or libsecret is not installed. `nil`: try it.
    static func precondition() -> String? {
        guard let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 else {
            return "no session bus: DBUS_SESSION_BUS_ADDRESS is not set"
        }
        guard tr_secret_load() == 1 else {
            return "libsecret is not installed: Debian's libsecret-1-0"
        }
        return nil
    }

    /// The key the secret service holds for `store`.
    public static func lookup(store: String) -> Answer {
        if let reason = precondition() { return .unreachable(reason) }
        var value = [CChar](repeating: 0, count: 512)
        var message = [CChar](repeating: 0, count: 512)
        var length = 0
        let status = tr_secret_lookup(application, store, &value, value.count, &length, &message, message.count)
        defer { for index in value.indices { value[index] = 0 } }
        switch Int(status) {
        case Int(TR_SECRET_FOUND):
            let bytes = value[0..<length].map { UInt8(bitPattern: $0) }
            return .key(String(decoding: bytes, as: UTF8.self))
        case Int(TR_SECRET_TOO_LONG): return .failed("its value is not a store key (too long)")
        default: return answer(status, message)
        }
    }

    /// Stores `key` as a new item for `store` in the default collection.
    public static func create(store: String, key: String) -> Answer {
        if let reason = precondition() { return .unreachable(reason) }
        var message = [CChar](repeating: 0, count: 512)
        let label = "tokenrelay store key (\(store))"
        return answer(tr_secret_create(application, store, label, key, &message, message.count), message)
    }

    /// Removes every item for `store` (`.absent`: there was none).
    public static func delete(store: String) -> Answer {
        if let reason = precondition() { return .unreachable(reason) }
        var message = [CChar](repeating: 0, count: 512)
        return answer(tr_secret_delete(application, store, &message, message.count), message)
    }

    private static func answer(_ status: Int32, _ message: [CChar]) -> Answer {
        // Another process's words (the bus, the secret service): cleaned and bounded as server text is.
        let text = ServerText(
            String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        ).value
        switch Int(status) {
        case Int(TR_SECRET_FOUND): return .done
        case Int(TR_SECRET_ABSENT): return .absent
        case Int(TR_SECRET_UNREACHABLE): return .unreachable("no secret service on the session bus: \(text)")
        case Int(TR_SECRET_LOCKED): return .locked
        case Int(TR_SECRET_NO_COLLECTION):
            return .unreachable("the secret service has no default collection (a new keyring needs a person)")
        case Int(TR_SECRET_SEVERAL): return .several
        default: return .failed(text.isEmpty ? "the secret service failed" : text)
        }
    }
}
