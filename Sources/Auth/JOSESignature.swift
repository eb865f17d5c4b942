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
