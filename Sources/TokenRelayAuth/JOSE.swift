import FoundationEssentials
import TokenRelayJSONRPC
import TokenRelayLogging

/// One public key of a JWKS document (RFC 7517), as far as ID-token verification uses it.
public struct JSONWebKey: Sendable, Equatable {
    /// The key type and its public parameters (raw big-endian bytes).
    public enum Material: Sendable, Equatable {
        /// RSA modulus and exponent.
        case rsa(n: [UInt8], e: [UInt8])
        /// An EC P-256 point.
        case p256(x: [UInt8], y: [UInt8])
    }

    /// `kid`, if any.
    public let keyID: String?
    /// `alg`, if the key names one.
    public let algorithm: String?
    /// The public parameters.
    public let material: Material

    /// Whether `jws` carries a valid signature by this key (RS256, PS256 or ES256 only).
    public func verifies(_ jws: CompactJWS) -> Bool {
        JOSESignature.verify(algorithm: jws.algorithm, key: self, input: jws.signingInput, signature: jws.signature)
    }
}

/// A parsed JWKS document (keys of types this build cannot use, and keys not for signatures, are
/// left out). Pure.
public struct JSONWebKeySet: Sendable, Equatable {
    /// The usable signing keys.
    public let keys: [JSONWebKey]

    /// Bodies beyond this are refused unparsed.
    static let maximumSize = 1 << 20

    /// Parses a JWKS document.
    public static func parse(_ body: [UInt8]) throws(AuthError) -> JSONWebKeySet {
        guard body.count <= maximumSize else { throw .invalidIDToken("the JWKS document is too large") }
        guard let object = try? TokenResponseParser.jsonObject(body), let list = object["keys"]?.arrayValue else {
            throw .invalidIDToken("the JWKS document is not an object with a keys list")
        }
        var keys: [JSONWebKey] = []
        for case .object(let entry) in list {
            if let use = entry["use"]?.stringValue, use != "sig" { continue }
            if let ops = entry["key_ops"]?.stringArray, !ops.contains("verify") { continue }
            func bytes(_ name: String) -> [UInt8]? {
                entry[name]?.stringValue.flatMap { Base64URL.decode(Substring($0)) }.flatMap { $0.isEmpty ? nil : $0 }
            }
            let material: JSONWebKey.Material
            switch entry["kty"]?.stringValue {
            case "RSA":
                guard let n = bytes("n"), let e = bytes("e") else { continue }
                material = .rsa(n: n, e: e)
            case "EC":
                guard entry["crv"]?.stringValue == "P-256", let x = bytes("x"), let y = bytes("y"), x.count == 32,
                    y.count == 32
                else { continue }
                material = .p256(x: x, y: y)
            default:
                continue
            }
            keys.append(
                JSONWebKey(keyID: entry["kid"]?.stringValue, algorithm: entry["alg"]?.stringValue, material: material))
        }
        return JSONWebKeySet(keys: keys)
    }
}

/// A JWS in compact serialization (RFC 7515 §7.1), split and decoded but not verified. Pure.
public struct CompactJWS: Sendable {
    /// `alg` from the protected header.
    public let algorithm: String
    /// `kid` from the protected header, if any.
    public let keyID: String?
    /// The decoded payload (a JSON object for an ID token).
    public let payload: [UInt8]
    /// The signature bytes.
    public let signature: [UInt8]
    /// `BASE64URL(header) "." BASE64URL(payload)`: what the signature covers.
    public let signingInput: [UInt8]

    /// Compact tokens beyond this are refused.
    static let maximumSize = 64 << 10

    /// Splits and decodes `token`.
    public static func parse(_ token: String) throws(AuthError) -> CompactJWS {
        guard token.utf8.count <= maximumSize else { throw .invalidIDToken("it is too large") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .invalidIDToken("it is not a compact JWS (three parts)") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw .invalidIDToken("a part is not base64url") }
        guard let header = try? TokenResponseParser.jsonObject(headerBytes) else {
            throw .invalidIDToken("the header is not a JSON object")
        }
        guard let algorithm = header["alg"]?.stringValue else { throw .invalidIDToken("the header has no alg") }
        guard header["crit"] == nil else { throw .invalidIDToken("the header has critical extensions") }
        let keyID = header["kid"]?.stringValue
        return CompactJWS(
            algorithm: algorithm, keyID: keyID, payload: payload, signature: signature,
            signingInput: Array(parts[0].utf8) + [0x2E] + Array(parts[1].utf8))
    }
}

/// The ID token checks of OpenID Connect Core §3.1.3.7 that need no key. Pure.
public struct IDTokenClaims: Sendable, Equatable {
    /// The allowed clock difference.
    static let leeway: TimeInterval = 60
    /// The algorithms accepted (asymmetric only: `none` and HMAC are refused).
    static let algorithms: Set<String> = ["RS256", "PS256", "ES256"]

    /// `sub`.
    public let subject: String
    /// `email`, if present.
    public let email: String?
    /// `name`, if present.
    public let name: String?

    /// Validates the payload's claims against what the login expects.
    public static func validate(
        _ payload: [UInt8], issuer: String, clientID: String, nonce: String?, now: Date
    ) throws(AuthError) -> IDTokenClaims {
        guard let claims = try? TokenResponseParser.jsonObject(payload) else {
            throw .invalidIDToken("the payload is not a JSON object")
        }
        guard let iss = claims["iss"]?.stringValue else { throw .invalidIDToken("iss is missing") }
        guard iss == issuer else {
            throw .invalidIDToken(
                "its iss '\(ServerText(iss).value)' is not the configured issuer '\(issuer)' (they must match exactly)")
        }
        let audiences: [String]
        if let single = claims["aud"]?.stringValue {
            audiences = [single]
        } else if let strings = claims["aud"]?.stringArray {
            audiences = strings
        } else {
            throw .invalidIDToken("aud is missing")
        }
        guard audiences.contains(clientID) else { throw .invalidIDToken("aud does not contain the client id") }
        if audiences.count > 1 || claims["azp"] != nil {
            guard claims["azp"]?.stringValue == clientID else { throw .invalidIDToken("azp is not the client id") }
        }
        func seconds(_ name: String) throws(AuthError) -> TimeInterval {
            guard let number = claims[name]?.numberValue, number.doubleValue.isFinite
            else { throw .invalidIDToken("\(name) is missing or not a number") }
            return number.doubleValue
        }
        let now = now.timeIntervalSince1970
        guard now < (try seconds("exp")) + leeway else { throw .invalidIDToken("it has expired") }
        guard (try seconds("iat")) <= now + leeway else { throw .invalidIDToken("iat is in the future") }
        if let nonce {
            guard claims["nonce"]?.stringValue == nonce else { throw .invalidIDToken("nonce is not the one sent") }
        }
        guard let subject = claims["sub"]?.stringValue, !subject.isEmpty else {
            throw .invalidIDToken("sub is missing")
        }
        return IDTokenClaims(
            subject: subject, email: claims["email"]?.stringValue, name: claims["name"]?.stringValue)
    }
}
