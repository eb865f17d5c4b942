// libFuzzer target for the JOSE and JWKS parsers of OpenID Connect logins. Build and run from the
// package root:
//   swift build -c release --product FuzzJOSE -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING --scratch-path /tmp/fuzz-jose
//   /tmp/fuzz-jose/release/FuzzJOSE -max_total_time=20 Tests/Fuzz/jose-corpus
// A plain build gets an empty `main`.

#if FUZZING
    import Auth
    import Foundation

    /// libFuzzer's entry point, reached through SwiftPM's `--defsym main=FuzzJOSE_main`.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// The input is a JWKS document and a compact JWS separated by the first NUL byte (either part
    /// may be empty). Both parsers must fail cleanly or succeed; every parsed key is used to verify
    /// the parsed token (building libcrypto keys from arbitrary parameters); the claims are
    /// validated. Nothing may crash, and a token without a real signature must never verify.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        guard let data, size > 0 else { return 0 }
        let bytes = Array(UnsafeBufferPointer(start: data, count: size))
        let split = bytes.firstIndex(of: 0) ?? bytes.endIndex
        let document = Array(bytes[..<split])
        let token = String(decoding: bytes[min(split + 1, bytes.endIndex)...], as: UTF8.self)
        let keys = (try? JSONWebKeySet.parse(document))?.keys ?? []
        if let jws = try? CompactJWS.parse(token) {
            for key in keys where key.verifies(jws) {
                // Only a signature made with the private key verifies; the fuzzer cannot make one.
                preconditionFailure("a fuzzed token verified")
            }
            _ = try? IDTokenClaims.validate(
                jws.payload, issuer: "https://issuer.example", clientID: "cli", nonce: "n", now: Date())
        }
        return 0
    }

    @_cdecl("FuzzJOSE_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var argc = argc
        var argv = argv
        return LLVMFuzzerRunDriver(&argc, &argv, fuzzTestOneInput)
    }
#else
    /// Without `-DFUZZING` the target is an empty program, so plain builds and `swift build` stay quick.
    @main
    enum FuzzJOSE {
        static func main() {}
    }
#endif
