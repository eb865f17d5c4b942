import FoundationEssentials
import Synchronization
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// A session's DPoP key (RFC 9449): an EC P-256 private key, made once per session and kept with
/// its tokens in the store (sealed like a refresh token), so every process of the host proves
/// possession with the same key. Never printed: `description` shows only its thumbprint.
struct DPoPKey: Sendable, Equatable, CustomStringConvertible {
    let key: JOSEPrivateKey
    /// The public key as the proofs' `jwk` header member (`kty`, `crv`, `x`, `y`).
    let jwk: JSONObject
    /// The RFC 7638 SHA-256 thumbprint of ``jwk`` (base64url): what a bound token's `cnf.jkt` holds.
    let thumbprint: String

    /// The key of `key` (DER or PEM); `nil` when it is not a P-256 private key.
    init?(_ key: JOSEPrivateKey) {
        guard let point = JOSESignature.p256PublicKey(key) else { return nil }
        let x = Base64URL.encode(point.x)
        let y = Base64URL.encode(point.y)
        self.key = key
        jwk = ["kty": "EC", "crv": "P-256", "x": .string(x), "y": .string(y)]
        // RFC 7638 §3.2: the required members in lexicographic order, no white space.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        thumbprint = Base64URL.encode(LibCrypto.sha256(Array(canonical.utf8)))
    }

    /// A new key; `nil` when libcrypto failed.
    static func generate() -> DPoPKey? { JOSESignature.generateP256().flatMap(DPoPKey.init) }

    /// The key as the store keeps it: its DER, base64url.
    var stored: String { Base64URL.encode(key.bytes) }

    /// The key the store kept; `nil` when it is not one.
    init?(stored: String) {
        guard let der = Base64URL.decode(Substring(stored)) else { return nil }
        self.init(JOSEPrivateKey(bytes: der, encoding: .der))
    }

    static func == (lhs: DPoPKey, rhs: DPoPKey) -> Bool { lhs.thumbprint == rhs.thumbprint }

    var description: String { "DPoPKey(jkt: \(thumbprint))" }

    /// A proof (RFC 9449 §4.2) for `method` to `url`: `typ` dpop+jwt, ES256, the public `jwk`;
    /// `htm`, `htu` (the URL without query and fragment), `iat`, a random `jti`, `ath` (the
    /// access token's SHA-256) on resource requests, and the server's `nonce` when it gave one.
    func proof(method: String, url: ParsedURL, accessToken: String?, nonce: String?, now: Date) throws(AuthError)
        -> String
    {
        let header: JSONObject = ["typ": "dpop+jwt", "alg": "ES256", "jwk": .object(jwk)]
        var payload: JSONObject = [
            "jti": .string(try JWSBuilder.randomID()), "htm": .string(method),
            "htu": .string(url.root + url.path),
            "iat": .number(JSONNumber(Int64(now.timeIntervalSince1970.rounded(.down)))),
        ]
        if let accessToken { payload["ath"] = .string(Base64URL.encode(LibCrypto.sha256(Array(accessToken.utf8)))) }
        if let nonce { payload["nonce"] = .string(nonce) }
        guard let proof = JWSBuilder.compact(header: header, payload: payload, algorithm: "ES256", key: key) else {
            throw .configuration("the DPoP key could not sign a proof")
        }
        return proof
    }
}

/// The last DPoP nonce each server gave (RFC 9449 §8, §9), by origin (`scheme://host[:port]`),
/// shared by the token endpoint and the resources of every session of a manager. Bounded: past
/// ``capacity`` origins the table starts again (a nonce lost costs one more `use_dpop_nonce`).
final class DPoPNonces: Sendable {
    static let capacity = 256
    /// A nonce longer than this is not kept (a server's nonce is short; this one is not one).
    static let maximumLength = 512
    private let nonces = Mutex<[String: String]>([:])

    /// The nonce to put in a proof to `url`'s origin.
    func nonce(for url: ParsedURL) -> String? { nonces.withLock { $0[url.root] } }

    /// Keeps the `DPoP-Nonce` of a response from `url`'s origin; whether there was one (new or not).
    @discardableResult
    func remember(_ headers: HTTPHeaders, from url: ParsedURL) -> Bool {
        guard let nonce = headers["DPoP-Nonce"], !nonce.isEmpty, nonce.utf8.count <= Self.maximumLength,
            nonce.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return false }
        nonces.withLock { table in
            if table.count >= Self.capacity, table[url.root] == nil { table.removeAll() }
            table[url.root] = nonce
        }
        return true
    }

    /// Whether `status` and `headers` are a resource server's `use_dpop_nonce` challenge (RFC 9449
    /// §9): a 401 with a `DPoP` challenge whose `error` is `use_dpop_nonce`.
    static func isNonceChallenge(status: Int, headers: HTTPHeaders) -> Bool {
        WWWAuthenticateChallenge.isUnauthorized(
            status: status, headers: headers, schemes: ["DPoP"], error: "use_dpop_nonce")
    }
}
