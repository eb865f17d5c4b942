import FoundationEssentials
import TokenRelayHTTP
import TokenRelayHTTPFields
import TokenRelayJSONRPC
import TokenRelayLogging

/// A validated successful token response (RFC 6749 §5.1, SPEC §7).
public struct TokenResponse: Sendable, Equatable, CustomStringConvertible {
    /// The access token (non-empty, visible ASCII only).
    public let accessToken: String
    /// `Bearer` in the server's spelling.
    public let tokenType: String
    /// Lifetime in seconds; nil when the server gave none.
    public let expiresIn: Int?
    /// A (rotated) refresh token, if sent.
    public let refreshToken: String?
    /// The granted scope, if sent.
    public let scope: String?
    /// The OpenID Connect ID token, if sent (validated before anything is stored).
    public var idToken: String? = nil

    /// Redacted: never shows a token.
    public var description: String {
        "TokenResponse(expiresIn: \(expiresIn.map(String.init) ?? "unknown"), refreshToken: \(refreshToken == nil ? "none" : "[REDACTED]"))"
    }
}

/// How a token endpoint answer is classified.
enum TokenEndpointOutcome: Sendable {
    /// A valid token response.
    case success(TokenResponse)
    /// A failure; `transient` failures may be retried, after `retryAfter` when the server said.
    case failure(AuthError, transient: Bool, retryAfter: Duration?)
}

/// Pure validation of token endpoint responses. Never puts the body into an error.
enum TokenResponseParser {
    /// Bodies beyond this are rejected unparsed.
    static let maximumBodySize = 1 << 20
    /// `expires_in` beyond ten years is not believed.
    static let maximumLifetime = 10 * 365 * 24 * 3600

    /// Classifies one HTTP answer from the token endpoint.
    static func classify(_ response: HTTPResponse, dpop: Bool = false) -> TokenEndpointOutcome {
        let status = response.status
        if status == 200 {
            do {
                return .success(try parseSuccess(response.body, dpop: dpop))
            } catch {
                return .failure(error, transient: false, retryAfter: nil)
            }
        }
        if (300...399).contains(status) {
            return .failure(
                .invalidTokenResponse(
                    "the token endpoint answered with a redirect (HTTP \(status)); redirects are not followed"),
                transient: false, retryAfter: nil)
        }
        let refusal = AuthorizationServerCall.refusal(response, from: "token endpoint")
        let transient =
            AuthorizationServerCall.isTransient(status: status) || refusal.oauthError == "temporarily_unavailable"
        let retryAfter = status == 429 || status == 503 ? parseRetryAfter(response.headers["Retry-After"]) : nil
        return .failure(refusal, transient: transient, retryAfter: retryAfter)
    }

    /// Validates a 200 body.
    static func parseSuccess(_ body: [UInt8], dpop: Bool = false) throws(AuthError) -> TokenResponse {
        let object = try jsonObject(body)
        guard let accessToken = object["access_token"]?.stringValue else {
            throw .invalidTokenResponse("access_token is missing or not a string")
        }
        guard !accessToken.isEmpty else { throw .invalidTokenResponse("access_token is empty") }
        // Registered before anything else can fail (one registration: one matcher rebuild).
        let refreshValue = object["refresh_token"]?.stringValue
        Redactor.shared.registerTokens([accessToken] + (refreshValue.map { [$0] } ?? []))
        guard accessToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw .invalidTokenResponse("access_token contains characters not allowed in a header")
        }
        guard let tokenType = object["token_type"]?.stringValue else {
            throw .invalidTokenResponse("token_type is missing or not a string")
        }
        // A DPoP request answered with a bearer token parses (its tokens must be revoked), and
        // ``TokenEndpointClient/send`` refuses it as a downgrade (RFC 9449 §5).
        if dpop {
            guard ["dpop", "bearer"].contains(tokenType.lowercased()) else {
                throw .invalidTokenResponse("token_type is neither DPoP nor Bearer")
            }
        } else if tokenType.lowercased() != "bearer" {
            // RFC 8693 §2.2.1: a token exchange that issues something other than an access token
            // (an ID-JAG, SPEC §9.9) says `N_A`; that token is an assertion, never a bearer token.
            let issued = object["issued_token_type"]?.stringValue
            guard tokenType == "N_A", let issued, issued != TokenExchange.accessTokenType else {
                throw .invalidTokenResponse("token_type is not Bearer")
            }
        }
        let expiresIn = try parseExpiresIn(object["expires_in"])
        var refreshToken: String?
        if let value = object["refresh_token"], value != .null {
            guard let string = value.stringValue, !string.isEmpty else {
                throw .invalidTokenResponse("refresh_token is not a non-empty string")
            }
            guard string.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                throw .invalidTokenResponse("refresh_token contains characters not allowed in a form")
            }
            refreshToken = string
        }
        var scope: String?
        if let value = object["scope"], value != .null {
            guard let string = value.stringValue else { throw .invalidTokenResponse("scope is not a string") }
            scope = string
        }
        var idToken: String?
        if let value = object["id_token"], value != .null {
            guard let string = value.stringValue, !string.isEmpty else {
                throw .invalidTokenResponse("id_token is not a non-empty string")
            }
            Redactor.shared.register(string)
            idToken = string
        }
        return TokenResponse(
            accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn, refreshToken: refreshToken,
            scope: scope, idToken: idToken)
    }

    /// `expires_in`: a positive integer, a numeric string or an integral float; absent: unknown.
    static func parseExpiresIn(_ value: JSONValue?) throws(AuthError) -> Int? {
        guard let value, value != .null else { return nil }
        let seconds: Int
        if let string = value.stringValue {
            guard !string.isEmpty, string.utf8.count <= 12, string.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let number = Int(string)
            else { throw .invalidTokenResponse("expires_in is not a positive integer") }
            seconds = number
        } else if let number = value.numberValue {
            let double = number.doubleValue
            guard double.isFinite, double.rounded() == double, double >= 1, double <= Double(maximumLifetime) else {
                throw .invalidTokenResponse("expires_in is not a positive integer")
            }
            seconds = Int(double)
        } else {
            throw .invalidTokenResponse("expires_in is not a number")
        }
        guard seconds > 0, seconds <= maximumLifetime else {
            throw .invalidTokenResponse("expires_in is not a positive integer")
        }
        return seconds
    }

    /// An RFC 6749 §5.2 error object, if the body is one.
    static func parseError(_ body: [UInt8], status: Int) -> AuthError? {
        guard let object = try? jsonObject(body), let error = object["error"]?.stringValue, !error.isEmpty else {
            return nil
        }
        // Server text: cleaned here, once, before anything copies it (SPEC §5.3).
        let description = (object["error_description"]?.stringValue).map { ServerText($0) }
        return .oauth(error: ServerText(error), description: description, status: status)
    }

    /// `Retry-After` in delta-seconds (HTTP dates are ignored: backoff applies instead).
    static func parseRetryAfter(_ value: String?) -> Duration? {
        guard let value = value.map(HTTPFieldRules.trimmingWhitespace), !value.isEmpty, value.utf8.count <= 9,
            value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let seconds = Int(value)
        else { return nil }
        return .seconds(seconds)
    }

    /// Parses `body` as exactly one JSON object.
    static func jsonObject(_ body: [UInt8]) throws(AuthError) -> JSONObject {
        guard body.count <= maximumBodySize else { throw .invalidTokenResponse("the body is too large") }
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(body)
        } catch {
            throw .invalidTokenResponse("the body is not JSON")
        }
        guard let object = parsed.objectValue else {
            throw .invalidTokenResponse("the body is not a JSON object")
        }
        return object
    }
}
