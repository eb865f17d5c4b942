import FoundationEssentials
import TokenRelayHTTP
import TokenRelayHTTPFields
import TokenRelayLogging

/// Where tokens and metadata may be fetched from: HTTPS anywhere, plain HTTP only on loopback
/// (127.0.0.0/8, ::1, localhost); no user info, no fragment.
enum EndpointPolicy {
    /// The decision, made on libcurl's parse of `url` (``ParsedURL``, the parser that sends the
    /// request) just before it is sent: returns the parse (send its ``ParsedURL/text``), or throws
    /// a configuration error unless `url` is an allowed endpoint.
    @discardableResult
    static func check(_ url: String, what: String) throws(AuthError) -> ParsedURL {
        // An endpoint may be shown to a person (an authorization or verification URL): no C1
        // control or bidirectional formatting character (C0 ones the parse refuses).
        guard !ServerText.containsUnsafeCharacter(url) else {
            throw .configuration("\(what) contains a control or bidirectional formatting character")
        }
        let parsed: ParsedURL
        do {
            parsed = try ParsedURL(url)
        } catch .userInfo {
            throw .configuration("\(what) must not contain user information")
        } catch {
            throw .configuration("\(what) is not an absolute http(s) URL")
        }
        guard !parsed.hadFragment else { throw .configuration("\(what) must not contain a fragment") }
        guard parsed.scheme == "https" || parsed.isLoopback else {
            throw .configuration("\(what) must use https (plain http is allowed only on loopback)")
        }
        return parsed
    }

    /// An early check when a session is registered, without loading libcurl (starting the process
    /// must not pay for it). Advisory only: ``check(_:what:)`` decides before anything is sent,
    /// so where the two disagree the request is refused, never sent somewhere unchecked.
    static func precheck(_ url: String, what: String) throws(AuthError) {
        guard let syntax = URLSyntax(url), !syntax.host.isEmpty else {
            throw .configuration("\(what) is not an absolute URL")
        }
        guard !syntax.hasUserInfo else { throw .configuration("\(what) must not contain user information") }
        guard !syntax.hasFragment else { throw .configuration("\(what) must not contain a fragment") }
        // The host as written (an IP literal keeps its brackets): advisory, see above.
        guard syntax.isAllowedEndpoint else {
            throw .configuration(
                syntax.scheme == "http"
                    ? "\(what) must use https (plain http is allowed only on loopback)" : "\(what) must use https")
        }
    }
}
