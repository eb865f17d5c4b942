import Foundation
import Testing

@testable import TokenRelayAuth

@Suite struct Base64URLTests {
    @Test func everyLengthRoundTripsInTheURLSafeAlphabetWithoutPadding() {
        for length in 0...40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 250) }
            let text = Base64URL.encode(bytes)
            #expect(
                text.utf8.allSatisfy { $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "=") })
            let standard = Data(bytes).base64EncodedString()
            #expect(text == standard.replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: ""))
            #expect(Base64URL.decode(Substring(text)) == bytes)
        }
    }

    @Test(arguments: ["AA==", "A+8", "A/8", "A", "AAAAA", "AA AA", "AA\n"])
    func paddingTheStandardLettersAndImpossibleLengthsAreRefused(text: String) {
        #expect(Base64URL.decode(Substring(text)) == nil)
    }

    @Test func theStandardAlphabetIsTheURLSafeOneTranslatedAndPadded() {
        #expect(Base64URL.standardAlphabet("-_8") == "+/8=")
        #expect(Base64URL.standardAlphabet("AAAA") == "AAAA")
        #expect(Base64URL.standardAlphabet("AA") == "AA==")
    }
}
