import CCrypto
import Foundation

@testable import TokenRelayAuth

/// Signing keys generated with libcrypto for ID-token tests (never committed): RSA 2048 and P-256.
/// Each instance frees its key when released.
final class TestSigningKey: @unchecked Sendable {
    // @unchecked: the EVP_PKEY is only read after init (libcrypto allows concurrent use of a
    // key for signing once it is built) and freed in deinit.
    enum Kind { case rsa, p256 }

    let kind: Kind
    let kid: String
    private let pkey: OpaquePointer

    init(_ kind: Kind, kid: String) throws {
        self.kind = kind
        self.kid = kid
        guard let context = EVP_PKEY_CTX_new_from_name(nil, kind == .rsa ? "RSA" : "EC", nil) else {
            throw TestKeyError()
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw TestKeyError() }
        switch kind {
        case .rsa: guard EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) == 1 else { throw TestKeyError() }
        case .p256: guard EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else { throw TestKeyError() }
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw TestKeyError() }
        pkey = key
    }

    deinit { EVP_PKEY_free(pkey) }

    /// The public JWK (as a JSON object text).
    var jwk: String {
        switch kind {
        case .rsa:
            return
                #"{"kty":"RSA","kid":"\#(kid)","use":"sig","n":"\#(Base64URL.encode(bignum("n")))","e":"\#(Base64URL.encode(bignum("e")))"}"#
        case .p256:
            var point = [UInt8](repeating: 0, count: 65)
            var length = 0
            _ = point.withUnsafeMutableBufferPointer {
                EVP_PKEY_get_octet_string_param(pkey, "pub", $0.baseAddress, 65, &length)
            }
            let x = Array(point[1..<33])
            let y = Array(point[33..<65])
            return
                #"{"kty":"EC","crv":"P-256","kid":"\#(kid)","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}"#
        }
    }

    private func bignum(_ name: String) -> [UInt8] {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { return [] }
        defer { BN_free(bn) }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        _ = bytes.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        return bytes
    }

    /// A compact JWS of `claims` with `alg` (RS256, PS256 or ES256), signed by this key.
    func sign(_ claims: String, alg: String, kid: String? = nil) -> String {
        let header = #"{"alg":"\#(alg)","typ":"JWT","kid":"\#(kid ?? self.kid)"}"#
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(signature(Array(input.utf8), alg: alg))
    }

    func signature(_ input: [UInt8], alg: String) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { return [] }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestSignInit(context, &keyContext, EVP_sha256(), nil, pkey) == 1 else { return [] }
        if alg == "PS256", let keyContext {
            EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING)
            EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST)
        }
        var length = 0
        _ = input.withUnsafeBufferPointer { EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }
        var output = [UInt8](repeating: 0, count: length)
        _ = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer {
                EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count)
            }
        }
        output = Array(output.prefix(length))
        return kind == .p256 ? Self.rawSignature(der: output) : output
    }

    /// DER ECDSA-Sig-Value -> r || s (32 bytes each).
    static func rawSignature(der: [UInt8]) -> [UInt8] {
        var index = 2
        var out: [UInt8] = []
        for _ in 0..<2 {
            let length = Int(der[index + 1])
            var value = Array(der[(index + 2)..<(index + 2 + length)])
            while value.count > 32 { value.removeFirst() }
            out += [UInt8](repeating: 0, count: 32 - value.count) + value
            index += 2 + length
        }
        return out
    }
}

struct TestKeyError: Error {}
