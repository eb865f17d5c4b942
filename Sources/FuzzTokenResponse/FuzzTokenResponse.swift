// libFuzzer target for the other trust boundary: what authorization servers send. The first byte
// picks the parser; the rest is its input:
//   0  a token endpoint answer (the second byte picks the HTTP status, the rest is the body)
//   1  a discovery document for the issuer https://issuer.example
//   2  a WWW-Authenticate field value
//   3  server text and the redactor: the second byte gives a pattern count, each pattern is a
//      length byte and its bytes, the rest is the text; the matcher must agree with a naive search
//   4  an echo of the canary encoded (percent-encoded in any spelling, base64 or base64url at any
//      offset, a Basic credential) between fuzzed bytes: the redacted text decoded the same way
//      must not give the canary back
// Every message, OAuth code and description that comes out is checked: bounded, no control
// characters, and never the canary secret (registered with the redactor), however it was encoded.
// Build and run from the package root (scripts/fuzz does this):
//   swift build -c release --product FuzzTokenResponse -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       -Xswiftc -enable-testing --scratch-path /tmp/fuzz-token
//   /tmp/fuzz-token/release/FuzzTokenResponse -max_total_time=20 Tests/Fuzz/token-response-corpus
// A plain build replays the files named on its command line.

import FoundationEssentials
import FuzzSupport
import TokenRelayHTTP

@testable import TokenRelayAuth
@testable import TokenRelayLogging

/// The secret the fuzzer tries to smuggle out (seeds carry it in every field).
let canary = "fuzz-canary-Zq7Xk2"
let canaryBytes = Array(canary.utf8)
let statuses = [200, 400, 401, 403, 429, 500, 503, 302, 204, 408, 404, 418]
let issuer = "https://issuer.example"

/// Whether `needle` occurs in `haystack`, byte for byte.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    return (0...(haystack.count - needle.count)).contains {
        haystack[$0..<($0 + needle.count)].elementsEqual(needle)
    }
}

/// A message tokenrelay may print: never the canary.
func checkMessage(_ text: String, _ what: String) {
    precondition(!contains(Array(text.utf8), canaryBytes), "\(what) shows the canary")
}

/// Server text as copied: bounded, no control characters, never the canary.
func checkServerText(_ text: String, _ what: String) {
    checkMessage(text, what)
    precondition(text.utf8.count <= ServerText.maximumBytes, "\(what) is longer than the bound")
    precondition(
        !text.unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) },
        "\(what) has a control character")
}

func checkError(_ error: AuthError) {
    checkMessage(error.description, "error description")
    if let code = error.oauthError { checkServerText(code, "oauthError") }
    if let text = error.oauthErrorDescription { checkServerText(text, "oauthErrorDescription") }
}

func fuzzTokenAnswer(_ input: ArraySlice<UInt8>) {
    guard let first = input.first else { return }
    var headers = HTTPHeaders()
    headers.add(name: "Retry-After", value: String(first % 200))
    let response = HTTPResponse(
        status: statuses[Int(first) % statuses.count], headers: headers, body: Array(input.dropFirst()))
    switch TokenResponseParser.classify(response) {
    case .success(let token):
        precondition(response.status == 200, "a success that is not HTTP 200")
        precondition(!token.accessToken.isEmpty, "an empty access token")
        precondition(
            token.accessToken.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f }, "an access token unfit for a header")
        precondition(
            token.expiresIn.map { $0 > 0 && $0 <= TokenResponseParser.maximumLifetime } ?? true,
            "expires_in out of range")
        if let refresh = token.refreshToken {
            precondition(
                !refresh.isEmpty && refresh.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f },
                "a refresh token unfit for a form")
        }
        checkMessage(token.description, "token response description")
    case .failure(let error, _, let retryAfter):
        checkError(error)
        precondition(retryAfter.map { $0 >= .zero } ?? true, "a negative Retry-After")
    }
}

func fuzzDiscovery(_ input: ArraySlice<UInt8>) {
    do {
        let metadata = try AuthorizationServerMetadata.parse(Array(input), expectedIssuer: issuer)
        precondition(metadata.issuer == issuer, "metadata for another issuer")
        do {
            try EndpointPolicy.check(metadata.tokenEndpoint, what: "token_endpoint")
        } catch {
            preconditionFailure("an accepted token_endpoint that the endpoint policy refuses")
        }
    } catch {
        checkError(error)
    }
}

func fuzzChallenge(_ input: ArraySlice<UInt8>) {
    let field = String(decoding: input, as: UTF8.self)
    let challenges = WWWAuthenticateChallenge.parse(field)
    var headers = HTTPHeaders()
    headers.add(name: "WWW-Authenticate", value: field)
    precondition(WWWAuthenticateChallenge.parse(headers: headers) == challenges, "field and headers disagree")
    for challenge in challenges {
        precondition(!challenge.scheme.isEmpty, "a challenge without a scheme")
        for parameter in challenge.parameters {
            precondition(!parameter.name.isEmpty, "a parameter without a name")
            checkServerText(ServerText(parameter.value).value, "challenge parameter")
        }
    }
}

func fuzzRedaction(_ input: ArraySlice<UInt8>) {
    var rest = input
    let count = Int(rest.popFirst() ?? 0) % 8
    var patterns: [[UInt8]] = []
    for _ in 0..<count {
        guard let length = rest.popFirst() else { break }
        let size = min(Int(length % 24), rest.count)
        patterns.append(Array(rest.prefix(size)))
        rest = rest.dropFirst(size)
    }
    let text = Array(rest)
    // The matcher against a naive search: the same covered bytes.
    let matcher = SecretMatcher(patterns: patterns)
    var expected = [Bool](repeating: false, count: text.count)
    for pattern in patterns where !pattern.isEmpty && pattern.count <= text.count {
        for start in 0...(text.count - pattern.count)
        where text[start..<(start + pattern.count)].elementsEqual(pattern) {
            for index in start..<(start + pattern.count) { expected[index] = true }
        }
    }
    var covered = [Bool](repeating: false, count: text.count)
    let runs = text.withUnsafeBufferPointer { matcher.matches(in: $0) }
    var previousEnd = -1
    for run in runs {
        precondition(!run.isEmpty && run.lowerBound >= previousEnd, "runs empty, out of order or overlapping")
        previousEnd = run.upperBound
        for index in run { covered[index] = true }
    }
    if covered != expected {
        // Adjacent runs may be reported apart; the covered bytes must be the same.
        preconditionFailure("the matcher and a naive search disagree")
    }
    // Server text from the same bytes: cleaned, bounded, never the canary.
    let string = String(decoding: rest, as: UTF8.self)
    checkServerText(ServerText(string).value, "server text")
    checkMessage(Redactor.shared.redact(string), "redacted text")
}

/// The bytes of `text` with every `%XX` escape decoded.
func percentDecoded(_ text: [UInt8]) -> [UInt8] {
    func hex(_ byte: UInt8) -> UInt8? { UInt8(String(UnicodeScalar(byte)), radix: 16) }
    var output: [UInt8] = []
    var index = 0
    while index < text.count {
        if text[index] == UInt8(ascii: "%"), index + 2 < text.count, let high = hex(text[index + 1]),
            let low = hex(text[index + 2])
        {
            output.append(high << 4 | low)
            index += 3
        } else {
            output.append(text[index])
            index += 1
        }
    }
    return output
}

/// Every decoding of the base64 (or base64url) runs of `text`, at each of the four alignments.
func base64Decodings(_ text: [UInt8]) -> [[UInt8]] {
    let isBase64: (UInt8) -> Bool = { SecretForms.isBase64Character($0) }
    var decodings: [[UInt8]] = []
    var start = 0
    while start < text.count {
        guard isBase64(text[start]) else {
            start += 1
            continue
        }
        var end = start
        while end < text.count, isBase64(text[end]) { end += 1 }
        let run = text[start..<end].map {
            $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0
        }
        for skip in 0..<min(4, run.count) {
            let usable = (run.count - skip) / 4 * 4
            if usable > 0, let data = Data(base64Encoded: Data(run[skip..<(skip + usable)])) {
                decodings.append(Array(data))
            }
        }
        start = end
    }
    return decodings
}

func fuzzEncodedEcho(_ input: ArraySlice<UInt8>) {
    var rest = input
    guard let mode = rest.popFirst(), let split = rest.popFirst() else { return }
    let cut = rest.startIndex + min(Int(split), rest.count)
    let before = Array(rest[..<cut].prefix(64))
    let after = Array(rest[cut...].prefix(64))
    var text: [UInt8]
    switch mode % 6 {
    case 0, 1, 2:
        // Percent-encoded: every byte (upper- or lower-case hex), or the bytes `after` picks.
        let digits = Array((mode % 6 == 1 ? "0123456789abcdef" : "0123456789ABCDEF").utf8)
        var encoded: [UInt8] = []
        for (index, byte) in canaryBytes.enumerated() {
            let pick = mode % 6 < 2 || (after.isEmpty ? true : after[index % after.count] & 1 == 1)
            encoded += pick ? [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]] : [byte]
        }
        text = before + encoded + after
    case 3, 4:
        // Base64 (4: base64url, unpadded) of the canary between fuzzed bytes: any offset.
        var encoded = Array(Data(before + canaryBytes + after).base64EncodedString().utf8)
        if mode % 6 == 4 {
            encoded = encoded.compactMap {
                $0 == UInt8(ascii: "=")
                    ? nil
                    : $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0
            }
        }
        text = Array("x=".utf8) + encoded + Array(";".utf8)
    default:
        // A Basic credential: base64 of user:canary.
        text =
            Array("Authorization: Basic ".utf8)
            + Array(Data(before + Array(":".utf8) + canaryBytes).base64EncodedString().utf8)
    }
    let redacted = Array(Redactor.shared.redact(String(decoding: text, as: UTF8.self)).utf8)
    precondition(!contains(redacted, canaryBytes), "the canary itself in redacted text")
    precondition(!contains(percentDecoded(redacted), canaryBytes), "the canary percent-encoded in redacted text")
    for decoded in base64Decodings(redacted) {
        precondition(!contains(decoded, canaryBytes), "the canary base64-encoded in redacted text")
    }
}

/// One input: the first byte picks the parser.
@Sendable func fuzzTokenResponse(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    let input = bytes[1...]
    switch bytes[0] % 5 {
    case 0: fuzzTokenAnswer(input)
    case 1: fuzzDiscovery(input)
    case 2: fuzzChallenge(input)
    case 3: fuzzRedaction(input)
    default: fuzzEncodedEcho(input)
    }
}

@main
enum FuzzTokenResponse {
    static func main() {
        Redactor.shared.register(canary)
        FuzzDriver.run(fuzzTokenResponse)
    }
}
