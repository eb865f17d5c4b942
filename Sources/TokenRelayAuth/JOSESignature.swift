import CCrypto

/// Verifies JWS signatures (RS256, PS256, ES256) with libcrypto. This file holds all of Auth's
/// OpenSSL key and signature pointer work: every object created here is freed before returning.
enum JOSESignature {
    /// Whether `signature` over `input` verifies with `key` for `algorithm`. Unknown algorithms,
    /// `none`, HMAC and a key whose type does not fit the algorithm never verify.
    static func verify(algorithm: String, key: JSONWebKey, input: [UInt8], signature: [UInt8]) -> Bool {
        if let declared = key.algorithm, declared != algorithm { return false }
        let derSignature: [UInt8]
        switch (algorithm, key.material) {
        case ("RS256", .rsa), ("PS256", .rsa):
            derSignature = signature
        case ("ES256", .p256):
            guard signature.count == 64, let der = ecdsaDER(signature) else { return false }
            derSignature = der
        default:
            return false
        }
        guard let pkey = publicKey(key.material) else { return false }
        defer { tr_EVP_PKEY_free(pkey) }
        guard let context = tr_EVP_MD_CTX_new() else { return false }
        defer { tr_EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard tr_EVP_DigestVerifyInit(context, &keyContext, tr_EVP_sha256(), nil, pkey) == 1 else { return false }
        if algorithm == "PS256" {
            guard let keyContext, tr_EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                tr_EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else { return false }
        }
        let status = derSignature.withUnsafeBufferPointer { sig in
            input.withUnsafeBufferPointer { data in
                tr_EVP_DigestVerify(context, sig.baseAddress, sig.count, data.baseAddress, data.count)
            }
        }
        tr_ERR_clear_error()
        return status == 1
    }

    /// Builds a public key from JWK parameters (OSSL_PARAM_BLD + EVP_PKEY_fromdata). RSA keys under
    /// 2048 bits are refused. The builder keeps the pointers it is given until `to_param`, so names
    /// are static C strings (from the shim) and the EC point buffer is alive until then.
    private static func publicKey(_ material: JSONWebKey.Material) -> OpaquePointer? {
        guard let builder = tr_OSSL_PARAM_BLD_new() else { return nil }
        defer { tr_OSSL_PARAM_BLD_free(builder) }
        var bignums: [OpaquePointer] = []
        defer { for bignum in bignums { tr_BN_free(bignum) } }
        let typeName: String
        let params: UnsafeMutablePointer<OSSL_PARAM>?
        switch material {
        case .rsa(let n, let e):
            let modulus = Array(n.drop { $0 == 0 })
            guard modulus.count >= 256, e.count <= 8,
                let bn = modulus.withUnsafeBufferPointer({ tr_BN_bin2bn($0.baseAddress, Int32($0.count), nil) }),
                let be = e.withUnsafeBufferPointer({ tr_BN_bin2bn($0.baseAddress, Int32($0.count), nil) })
            else { return nil }
            bignums = [bn, be]
            guard tr_OSSL_PARAM_BLD_push_BN(builder, tokenrelay_param_rsa_n(), bn) == 1,
                tr_OSSL_PARAM_BLD_push_BN(builder, tokenrelay_param_rsa_e(), be) == 1
            else { return nil }
            params = tr_OSSL_PARAM_BLD_to_param(builder)
            typeName = "RSA"
        case .p256(let x, let y):
            let point = [UInt8(4)] + x + y
            params = point.withUnsafeBytes { bytes -> UnsafeMutablePointer<OSSL_PARAM>? in
                guard
                    tr_OSSL_PARAM_BLD_push_utf8_string(builder, tokenrelay_param_group(), tokenrelay_group_p256(), 0)
                        == 1,
                    tr_OSSL_PARAM_BLD_push_octet_string(builder, tokenrelay_param_pub(), bytes.baseAddress, bytes.count)
                        == 1
                else { return nil }
                return tr_OSSL_PARAM_BLD_to_param(builder)
            }
            typeName = "EC"
        }
        guard let params else { return nil }
        defer { tr_OSSL_PARAM_free(params) }
        guard let context = tr_EVP_PKEY_CTX_new_from_name(nil, typeName, nil) else { return nil }
        defer { tr_EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        guard tr_EVP_PKEY_fromdata_init(context) == 1,
            tr_EVP_PKEY_fromdata(context, &pkey, tokenrelay_evp_pkey_public_key(), params) == 1
        else {
            tr_ERR_clear_error()
            return nil
        }
        return pkey
    }

    /// The DER `ECDSA-Sig-Value` of a raw `r || s` signature (RFC 7518 §3.4). Pure.
    static func ecdsaDER(_ raw: [UInt8]) -> [UInt8]? {
        guard raw.count % 2 == 0, !raw.isEmpty, raw.count <= 132 else { return nil }
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let half = raw.count / 2
        let body = integer(raw[0..<half]) + integer(raw[half...])
        guard body.count < 128 else { return nil }
        return [0x30, UInt8(body.count)] + body
    }
}

/// A private key for signing JWS (client assertions, DPoP proofs), kept as its encoded bytes (a
/// PEM text from a secret source, or the DER libcrypto wrote for a generated key) and decoded by
/// libcrypto for each use, so no key object outlives a call. Never printed: `description` says
/// only what it is.
struct JOSEPrivateKey: Sendable, CustomStringConvertible {
    /// How `bytes` are encoded.
    enum Encoding: Sendable { case pem, der }

    /// What a key is, as far as JWS algorithms go.
    enum Kind: Sendable, Equatable {
        /// An EC key on P-256 (ES256).
        case p256
        /// An RSA key of this many bits.
        case rsa(bits: Int)
        /// Anything else (another curve, Ed25519, DSA...).
        case other
    }

    let bytes: [UInt8]
    let encoding: Encoding

    var description: String { "JOSEPrivateKey(<redacted>)" }
}

extension JOSESignature {
    /// The key's kind; `nil` when libcrypto cannot read it (not a private key, encrypted, damaged).
    static func kind(of key: JOSEPrivateKey) -> JOSEPrivateKey.Kind? {
        guard let pkey = load(key) else { return nil }
        defer { tr_EVP_PKEY_free(pkey) }
        if tr_EVP_PKEY_is_a(pkey, tokenrelay_key_type_rsa()) == 1 {
            return .rsa(bits: Int(tr_EVP_PKEY_get_bits(pkey)))
        }
        if tr_EVP_PKEY_is_a(pkey, tokenrelay_key_type_ec()) == 1 {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            let ok = name.withUnsafeMutableBufferPointer {
                tr_EVP_PKEY_get_utf8_string_param(pkey, tokenrelay_param_group(), $0.baseAddress, $0.count, &length)
            }
            tr_ERR_clear_error()
            guard ok == 1, length < name.count else { return .other }
            let group = String(decoding: name[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return group == "prime256v1" || group == "P-256" ? .p256 : .other
        }
        return .other
    }

    /// What libcrypto reads of a PEM certificate chain, as libcurl reads a client certificate
    /// (Sources/CCrypto/shim.h, `tr_PEM_read_certificate_chain`).
    enum CertificateChain: Sendable, Equatable {
        /// No certificate could be read at all.
        case unreadable
        /// The first certificate was read, a later one is damaged.
        case damaged
        /// `count` certificates; `keyMatches`: `key` is the first one's private key.
        case certificates(count: Int, keyMatches: Bool)
    }

    /// Reads the certificates of `pem` and checks `key` (an unreadable key never matches) against
    /// the first; `nil` when libcrypto cannot be loaded.
    static func certificateChain(_ pem: [UInt8], key: JOSEPrivateKey) -> CertificateChain? {
        guard !pem.isEmpty, pem.count < 1 << 20 else { return .unreadable }
        let pkey = load(key)
        defer { if let pkey { tr_EVP_PKEY_free(pkey) } }
        var matches: Int32 = 0
        let count = pem.withUnsafeBufferPointer {
            tr_PEM_read_certificate_chain($0.baseAddress, Int32($0.count), pkey, &matches)
        }
        switch count {
        case ..<(-1): return nil
        case -1: return .damaged
        case 0: return .unreadable
        default: return .certificates(count: Int(count), keyMatches: matches == 1)
        }
    }

    /// Whether `algorithm` (RS256, PS256, ES256) can sign with a key of `kind`: ES256 needs P-256,
    /// RS256 and PS256 an RSA key of at least 2048 bits (RFC 7518 §3.3).
    static func fits(_ algorithm: String, _ kind: JOSEPrivateKey.Kind) -> Bool {
        switch (algorithm, kind) {
        case ("ES256", .p256): true
        case ("RS256", .rsa(let bits)), ("PS256", .rsa(let bits)): bits >= 2048
        default: false
        }
    }

    /// The JWS signature of `input` with `key` for `algorithm` (RFC 7518 §3: PKCS #1 v1.5 or PSS
    /// with SHA-256, or ECDSA P-256 as raw `r || s`); `nil` when the key does not fit or libcrypto
    /// failed.
    static func sign(algorithm: String, key: JOSEPrivateKey, input: [UInt8]) -> [UInt8]? {
        guard let pkey = load(key) else { return nil }
        defer { tr_EVP_PKEY_free(pkey) }
        guard let context = tr_EVP_MD_CTX_new() else { return nil }
        defer { tr_EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard tr_EVP_DigestSignInit(context, &keyContext, tr_EVP_sha256(), nil, pkey) == 1 else {
            tr_ERR_clear_error()
            return nil
        }
        if algorithm == "PS256" {
            guard let keyContext, tr_EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                tr_EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
            else {
                tr_ERR_clear_error()
                return nil
            }
        }
        var length = 0
        let sized = input.withUnsafeBufferPointer { tr_EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }
        guard sized == 1, length > 0, length <= 1024 else {
            tr_ERR_clear_error()
            return nil
        }
        var signature = [UInt8](repeating: 0, count: length)
        let signed = signature.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer {
                tr_EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count)
            }
        }
        tr_ERR_clear_error()
        guard signed == 1, length <= signature.count else { return nil }
        signature.removeSubrange(length...)
        return algorithm == "ES256" ? ecdsaRaw(signature, half: 32) : signature
    }

    /// A new EC P-256 private key (for DPoP), as DER; `nil` if libcrypto failed.
    static func generateP256() -> JOSEPrivateKey? {
        guard let context = tr_EVP_PKEY_CTX_new_from_name(nil, tokenrelay_key_type_ec(), nil) else { return nil }
        defer { tr_EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        guard tr_EVP_PKEY_keygen_init(context) == 1,
            tr_EVP_PKEY_CTX_set_group_name(context, tokenrelay_group_p256()) == 1,
            tr_EVP_PKEY_generate(context, &pkey) == 1, let pkey
        else {
            tr_ERR_clear_error()
            return nil
        }
        defer { tr_EVP_PKEY_free(pkey) }
        let length = tr_i2d_PrivateKey(pkey, nil)
        guard length > 0, length < 4096 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return tr_i2d_PrivateKey(pkey, &cursor)
        }
        guard written == length else { return nil }
        return JOSEPrivateKey(bytes: der, encoding: .der)
    }

    /// The public point of a P-256 key, as the JWK `x` and `y` (32 bytes each); `nil` for another key.
    static func p256PublicKey(_ key: JOSEPrivateKey) -> (x: [UInt8], y: [UInt8])? {
        guard let pkey = load(key) else { return nil }
        defer { tr_EVP_PKEY_free(pkey) }
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        let ok = point.withUnsafeMutableBufferPointer {
            tr_EVP_PKEY_get_octet_string_param(pkey, tokenrelay_param_pub(), $0.baseAddress, $0.count, &length)
        }
        tr_ERR_clear_error()
        guard ok == 1, length == 65, point[0] == 4 else { return nil }
        return (Array(point[1..<33]), Array(point[33..<65]))
    }

    /// Decodes `key` with libcrypto; the caller frees the result.
    private static func load(_ key: JOSEPrivateKey) -> OpaquePointer? {
        guard !key.bytes.isEmpty, key.bytes.count < 1 << 20 else { return nil }
        let pkey = key.bytes.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            switch key.encoding {
            case .pem: tr_PEM_read_private_key(buffer.baseAddress, Int32(buffer.count))
            case .der: tr_d2i_AutoPrivateKey(buffer.baseAddress, buffer.count)
            }
        }
        tr_ERR_clear_error()
        return pkey
    }

    /// The raw `r || s` (each `half` bytes, big-endian, left-padded) of a DER `ECDSA-Sig-Value`
    /// made by libcrypto (RFC 7518 §3.4); `nil` when it is not one. Pure: the inverse of
    /// ``ecdsaDER(_:)``.
    static func ecdsaRaw(_ der: [UInt8], half: Int) -> [UInt8]? {
        guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2, der[1] < 0x80 else { return nil }
        var index = 2
        var output: [UInt8] = []
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { return nil }
            let length = Int(der[index + 1])
            index += 2
            guard length > 0, length < 0x80, index + length <= der.count else { return nil }
            var value = Array(der[index..<(index + length)].drop { $0 == 0 })
            guard value.count <= half else { return nil }
            value.insert(contentsOf: [UInt8](repeating: 0, count: half - value.count), at: 0)
            output += value
            index += length
        }
        return index == der.count ? output : nil
    }
}
