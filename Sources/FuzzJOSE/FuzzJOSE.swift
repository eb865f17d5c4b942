// libFuzzer target for the JOSE and JWKS parsers of OpenID Connect logins. Build and run from the
// package root:
//   swift build -c release --product FuzzJOSE -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING --scratch-path /tmp/fuzz-jose
//   /tmp/fuzz-jose/release/FuzzJOSE -max_total_time=20 Tests/Fuzz/jose-corpus
// A plain build replays the files named on its command line.

import Foundation
import FuzzSupport
import TokenRelayAuth

/// The input is a JWKS document and a compact JWS separated by the first NUL byte (either part
/// may be empty). Both parsers must fail cleanly or succeed; every parsed key is used to verify
/// the parsed token (building libcrypto keys from arbitrary parameters); the claims are
/// validated. Nothing may crash, and a token without a real signature must never verify.
@Sendable func fuzzJOSE(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
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
}

@main
enum FuzzJOSE {
    static func main() { FuzzDriver.run(fuzzJOSE) }
}
