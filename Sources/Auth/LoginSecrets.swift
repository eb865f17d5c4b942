import CCrypto
import Foundation
import Logging

/// The one-time values of an interactive login (RFC 7636, RFC 6749 §10.12, OIDC `nonce`), drawn from
/// libcrypto's CSPRNG. The verifier is registered with the redactor; `state`, `nonce` and the
/// challenge are meant to appear in the authorization URL shown to the person.
struct LoginSecrets: Sendable {
    /// The PKCE `code_verifier` (43 characters of base64url from 32 random bytes).
    let verifier: String
    /// `BASE64URL(SHA256(verifier))`, sent with `code_challenge_method=S256`.
    let challenge: String
    /// The `state` the callback must carry.
    let state: String
    /// The OpenID Connect `nonce` the ID token must carry.
    let nonce: String

    /// Fresh values; fails only when the system CSPRNG does.
    static func make() throws(AuthError) -> LoginSecrets {
        let verifier = Base64URL.encode(try randomBytes(32))
        Redactor.shared.register(verifier)
        return LoginSecrets(
            verifier: verifier, challenge: Base64URL.encode(sha256(Array(verifier.utf8))),
            state: Base64URL.encode(try randomBytes(16)), nonce: Base64URL.encode(try randomBytes(16)))
    }

    /// `count` bytes from `RAND_bytes`.
    static func randomBytes(_ count: Int) throws(AuthError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let status = bytes.withUnsafeMutableBufferPointer { tr_RAND_bytes($0.baseAddress, Int32(count)) }
        guard status == 1 else { throw .configuration("the system random generator failed") }
        return bytes
    }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        LibCrypto.require()
        var output = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in tr_SHA256(input.baseAddress, input.count, out.baseAddress) }
        }
        return output
    }
}

/// base64url without padding (RFC 4648 §5, RFC 7515 §2).
enum Base64URL {
    /// Encodes `bytes`.
    static func encode(_ bytes: [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// Decodes `text`; nil when it is not base64url (padding and whitespace refused).
    static func decode(_ text: Substring) -> [UInt8]? {
        guard
            text.utf8.allSatisfy({
                ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D
                    || $0 == 0x5F
            }), text.utf8.count % 4 != 1
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { Array($0) }
    }
}
