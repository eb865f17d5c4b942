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
            verifier: verifier, challenge: Base64URL.encode(LibCrypto.sha256(Array(verifier.utf8))),
            state: Base64URL.encode(try randomBytes(16)), nonce: Base64URL.encode(try randomBytes(16)))
    }

    /// `count` bytes from `RAND_bytes`.
    static func randomBytes(_ count: Int) throws(AuthError) -> [UInt8] {
        guard let bytes = LibCrypto.randomBytes(count) else {
            throw .configuration("the system random generator failed")
        }
        return bytes
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
