import CCrypto
import FoundationEssentials
import TokenRelayLogging

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
        let standard = Data(bytes).base64EncodedString().utf8
        return String(
            decoding: standard.lazy.filter { $0 != UInt8(ascii: "=") }.map {
                switch $0 {
                case UInt8(ascii: "+"): UInt8(ascii: "-")
                case UInt8(ascii: "/"): UInt8(ascii: "_")
                default: $0
                }
            }, as: UTF8.self)
    }

    /// Decodes `text`; nil when it is not base64url (padding and whitespace refused).
    static func decode(_ text: Substring) -> [UInt8]? {
        guard
            text.utf8.allSatisfy({
                ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D
                    || $0 == 0x5F
            }), text.utf8.count % 4 != 1
        else { return nil }
        return Data(base64Encoded: standardAlphabet(text)).map { Array($0) }
    }

    /// `text` with the URL-safe letters replaced by the standard ones (`-` → `+`, `_` → `/`),
    /// padded with `=` to a multiple of four: what `Data(base64Encoded:)` reads.
    static func standardAlphabet(_ text: some StringProtocol) -> String {
        var bytes = text.utf8.map {
            switch $0 {
            case UInt8(ascii: "-"): UInt8(ascii: "+")
            case UInt8(ascii: "_"): UInt8(ascii: "/")
            default: $0
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return String(decoding: bytes, as: UTF8.self)
    }
}
