import Testing

@testable import TokenRelayAuth

/// The digest every store key and PKCE challenge is made with, against published answers.
@Suite struct LibCryptoTests {
    @Test(arguments: [
        // FIPS 180-2 appendix B and the empty message.
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
    ])
    func sha256MatchesThePublishedDigests(message: String, digest: String) {
        #expect(StoreKey.hex(LibCrypto.sha256(Array(message.utf8))) == digest)
    }

    @Test func theS256ChallengeIsRFC7636sExample() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        #expect(
            Base64URL.encode(LibCrypto.sha256(Array(verifier.utf8))) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }
}
