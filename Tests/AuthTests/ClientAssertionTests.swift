import Foundation
import Testing

@testable import TokenRelayAuth
@testable import TokenRelayJSONRPC

/// JWS signing through libcrypto (client assertions, DPoP proofs): what is signed verifies with the
/// public key, the claims are RFC 7523's, the ECDSA encoding round-trips.
@Suite struct ClientAssertionTests {
    @Test func aGeneratedP256KeySignsWhatItsPublicKeyVerifies() throws {
        let key = try #require(JOSESignature.generateP256())
        #expect(JOSESignature.kind(of: key) == .p256)
        let point = try #require(JOSESignature.p256PublicKey(key))
        let jwk = JSONWebKey(keyID: nil, algorithm: nil, material: .p256(x: point.x, y: point.y))
        let input = Array("header.payload".utf8)
        let signature = try #require(JOSESignature.sign(algorithm: "ES256", key: key, input: input))
        #expect(signature.count == 64)
        #expect(JOSESignature.verify(algorithm: "ES256", key: jwk, input: input, signature: signature))
        #expect(!JOSESignature.verify(algorithm: "ES256", key: jwk, input: input + [0x2E], signature: signature))
    }

    @Test func anAssertionCarriesRFC7523ClaimsAndAFreshJTI() throws {
        let key = try #require(JOSESignature.generateP256())
        let point = try #require(JOSESignature.p256PublicKey(key))
        let jwk = JSONWebKey(keyID: "k1", algorithm: "ES256", material: .p256(x: point.x, y: point.y))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let make = {
            try ClientCredential.assertion(
                clientID: "app", key: key, algorithm: "ES256", keyID: "k1", audience: "https://as/token", now: now)
        }
        let first = try make()
        let second = try make()
        let jws = try CompactJWS.parse(first)
        #expect(jws.algorithm == "ES256" && jws.keyID == "k1")
        #expect(jwk.verifies(jws))
        let claims = try JSONParser.parse(jws.payload)
        #expect(claims["iss"]?.stringValue == "app" && claims["sub"]?.stringValue == "app")
        #expect(claims["aud"]?.stringValue == "https://as/token")
        #expect(claims["iat"]?.numberValue?.intValue == 1_800_000_000)
        #expect(claims["exp"]?.numberValue?.intValue == 1_800_000_060)
        let other = try JSONParser.parse(try CompactJWS.parse(second).payload)
        #expect(claims["jti"]?.stringValue != nil && claims["jti"]?.stringValue != other["jti"]?.stringValue)
    }

    @Test func keysAreCheckedAgainstTheirAlgorithm() throws {
        let key = try #require(JOSESignature.generateP256())
        #expect(try ClientCredential.algorithm(for: key, configured: nil) == "ES256")
        #expect(throws: AuthError.self) { try ClientCredential.algorithm(for: key, configured: "RS256") }
        let garbage = JOSEPrivateKey(
            bytes: Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----".utf8), encoding: .pem)
        #expect(JOSESignature.kind(of: garbage) == nil)
        #expect(throws: AuthError.self) { try ClientCredential.algorithm(for: garbage, configured: nil) }
    }

    @Test func ecdsaRawIsTheInverseOfECDSADER() throws {
        for raw in [[UInt8](repeating: 0xFF, count: 64), [0, 0, 1] + [UInt8](repeating: 7, count: 61)] {
            let der = try #require(JOSESignature.ecdsaDER(raw))
            #expect(JOSESignature.ecdsaRaw(der, half: 32) == raw)
        }
        #expect(JOSESignature.ecdsaRaw([0x30, 0x02, 0x02, 0x00], half: 32) == nil)
    }
}
