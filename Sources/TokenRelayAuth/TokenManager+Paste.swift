import FoundationEssentials

/// The pasted side of an authorization-code login's wait (SPEC §13.2): when the browser cannot
/// reach the loopback listener (SSH, a container), the person pastes the URL it was redirected to.
/// It is checked as the listener checks a callback (``RedirectRequest/evaluate(target:path:state:)``
/// and RFC 9207 `iss`) and accepted once; the listener keeps waiting meanwhile, and whichever comes
/// first completes the login. Must only be accessed from the manager's isolation.
final class PastedCallbacks {
    /// The redirect URI's origin (`http://127.0.0.1:PORT`) and path.
    let origin: String
    let path: String
    let state: String
    /// RFC 9207: the configured issuer, and whether the server promises `iss`.
    let issuer: String?
    let issuerRequired: Bool
    /// Where an accepted callback goes (the login's wait).
    let sink: AsyncStream<RedirectCallback>.Continuation
    /// A callback was accepted (pasted, or the listener's): nothing more is.
    var accepted = false

    init(
        origin: String, path: String, state: String, issuer: String?, issuerRequired: Bool,
        sink: AsyncStream<RedirectCallback>.Continuation
    ) {
        self.origin = origin
        self.path = path
        self.state = state
        self.issuer = issuer
        self.issuerRequired = issuerRequired
        self.sink = sink
    }

    /// `pasted` as the callback of this login, or why it is not: the address must be the
    /// redirect URI's (the browser's address bar shows what it could not reach), then every check
    /// the listener makes. A fragment and surrounding white space are ignored.
    func callback(_ pasted: String) throws(AuthError) -> RedirectCallback {
        var text = Substring(pasted).drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        while let last = text.last, last == " " || last == "\t" || last == "\r" || last == "\n" { text.removeLast() }
        if let fragment = text.firstIndex(of: "#") { text = text[..<fragment] }
        guard text.hasPrefix(origin + path) else {
            throw .pastedURL("it is not an address of this login's redirect URI (\(origin + path))")
        }
        switch RedirectRequest.evaluate(target: String(text.dropFirst(origin.count)), path: path, state: state) {
        case .refuse(let page):
            throw .pastedURL(page.message)
        case .callback(let callback):
            do {
                try TokenManager.checkIssuer(callback.issuers, expected: issuer, required: issuerRequired)
            } catch {
                throw .pastedURL(error.description)
            }
            return callback
        }
    }
}

extension TokenManager {
    /// Hands a pasted redirect URL (`login-complete`, `tokenrelay login --paste`) to the login of
    /// `key` in progress. Refused, the login going on, when no authorization-code login of the
    /// session waits for its callback (none started, it ended, or a callback was accepted already:
    /// a second paste is never exchanged) or when the URL is not that callback (another address,
    /// the wrong `state`, another issuer's `iss`, no code). Accepted, it ends the wait as the
    /// listener's callback would; the `login` call answers with the outcome.
    public func completeLogin(_ key: SessionKey, pastedURL: String) throws(AuthError) {
        guard let session = sessions[key] else { throw .configuration("unknown session \(key)") }
        guard let paste = session.login?.paste else {
            throw .pastedURL(
                "no login of profile '\(key.profile)' waits for its redirect (start one with login; a login that"
                    + " already received its callback is not completed twice)")
        }
        guard !paste.accepted else {
            throw .pastedURL("this login already received its callback; nothing was exchanged again")
        }
        let callback = try paste.callback(pastedURL)
        paste.accepted = true
        paste.sink.yield(callback)
        paste.sink.finish()
    }
}
