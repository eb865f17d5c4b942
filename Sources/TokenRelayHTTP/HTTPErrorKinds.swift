import TokenRelayErrorKinds

extension URITemplateError: KindedError {
    /// A path template that cannot be expanded is the caller's params.
    public var errorKind: ErrorKind { .invalidParams }
}

extension URLProblem: KindedError {
    /// A URL libcurl refuses is the caller's params (Relay reports a `base_url` as `config`).
    public var errorKind: ErrorKind { .invalidParams }
}

extension ServerSentEventError: KindedError {
    /// A stream over the parser's bounds is not a valid event stream.
    public var errorKind: ErrorKind { .protocol }
}
