import Testing

@testable import TokenRelayHTTP

@Suite struct WWWAuthenticateChallengeTests {
    typealias C = WWWAuthenticateChallenge

    @Test func parsesMultipleChallengesWithQuotedAndTokenValues() {
        let parsed = C.parse(#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#)
        #expect(
            parsed == [
                C(scheme: "Newauth", parameters: [("realm", "apps"), ("type", "1"), ("title", #"Login to "apps""#)]),
                C(scheme: "Basic", parameters: [("realm", "simple")]),
            ])
    }

    @Test func parsesToken68AndBareSchemes() {
        #expect(
            C.parse("Negotiate abc+/def==, Basic") == [
                C(scheme: "Negotiate", token68: "abc+/def=="), C(scheme: "Basic"),
            ])
        #expect(C.parse("Bearer") == [C(scheme: "Bearer")])
        #expect(C.parse("Digest abc=") == [C(scheme: "Digest", token68: "abc=")])
    }

    @Test func namesAndSchemesCompareCaseInsensitivelyWithWhitespaceAroundEquals() {
        let parsed = C.parse(#"BEARER  Realm = "r" ,ERROR= invalid_token ,  error_description="a, b""#)
        #expect(parsed.count == 1)
        #expect(parsed.first?.isScheme("bearer") == true)
        #expect(parsed.first?.parameter("error") == "invalid_token")
        #expect(parsed.first?.parameter("realm") == "r")
        #expect(parsed.first?.parameter("ERROR_DESCRIPTION") == "a, b")
    }

    @Test func survivesGarbage() {
        #expect(C.parse("").isEmpty)
        #expect(C.parse(" , ,").isEmpty)
        #expect(
            C.parse(#"Bearer realm="unterminated"#) == [C(scheme: "Bearer", parameters: [("realm", "unterminated")])])
        #expect(C.parse(#"="x", Basic realm=y"#) == [C(scheme: "Basic", parameters: [("realm", "y")])])
        #expect(C.parse("Bearer error=invalid_token junk, Basic").map(\.scheme) == ["Bearer", "Basic"])
    }

    @Test(arguments: 0..<64)
    func neverCrashesOnArbitraryBytes(seed: Int) {
        var generator = SplitMix(seed: UInt64(seed))
        let alphabet = Array(#"aB=,"\ \#t/+.=:;x"#.utf8)
        let bytes = (0..<Int(generator.next() % 40)).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))]
        }
        _ = C.parse(String(decoding: bytes, as: UTF8.self))
    }
}

/// A tiny deterministic generator for test inputs.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
