// libFuzzer target for the other trust boundary: what authorization servers send. The first byte
// picks the parser; the rest is its input:
//   0  a token endpoint answer (the second byte picks the HTTP status, the rest is the body)
//   1  a discovery document for the issuer https://issuer.example
//   2  a WWW-Authenticate field value
//   3  server text and the redactor: the second byte gives a pattern count, each pattern is a
//      length byte and its bytes, the rest is the text; the matcher must agree with a naive search
// Every message, OAuth code and description that comes out is checked: bounded, no control
// characters, and never the canary secret (registered with the redactor), however it was encoded.
// Build and run from the package root (scripts/fuzz does this):
//   swift build -c release --product FuzzTokenResponse -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING \
//       -Xswiftc -enable-testing --scratch-path /tmp/fuzz-token
//   /tmp/fuzz-token/release/FuzzTokenResponse -max_total_time=20 Tests/Fuzz/token-response-corpus
// A plain build replays the files named on its command line.

import FuzzSupport
import TokenRelayHTTP
import TokenRelayLogging

@testable import TokenRelayAuth

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

/// One input: the first byte picks the parser.
@Sendable func fuzzTokenResponse(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    let input = bytes[1...]
    switch bytes[0] % 4 {
    case 0: fuzzTokenAnswer(input)
    case 1: fuzzDiscovery(input)
    case 2: fuzzChallenge(input)
    default: fuzzRedaction(input)
    }
}

@main
enum FuzzTokenResponse {
    static func main() {
        Redactor.shared.register(canary)
        FuzzDriver.run(fuzzTokenResponse)
    }
}
