import CCrypto
import Glibc

/// libcrypto, loaded on first use (Sources/CCrypto/shim.h).
public enum LibCrypto {
    /// Loads libcrypto now, for a command that will need it, ahead of the need (one-shot `call`);
    /// `false` when it cannot be loaded.
    @discardableResult
    public static func load() -> Bool { tr_crypto_load() == 1 }

    /// Ends the process with a message when libcrypto.so.3 cannot be loaded, as the dynamic loader
    /// would have at exec had it been linked: a digest has no failure value to return. (libcurl,
    /// built against OpenSSL, cannot load without it either.) Every other wrapper returns its
    /// failure value, which its caller already handles.
    static func require() {
        guard tr_crypto_load() != 1 else { return }
        let message = "tokenrelay: libcrypto.so.3 could not be loaded (install OpenSSL 3's libssl3)\n"
        _ = message.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
        exit(70)
    }

    /// `count` random bytes from libcrypto's CSPRNG; `nil` if it failed.
    static func randomBytes(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { tr_RAND_bytes($0.baseAddress, Int32(count)) }
        return ok == 1 ? bytes : nil
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        require()
        var output = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in tr_SHA256(input.baseAddress, input.count, out.baseAddress) }
        }
        return output
    }
}
