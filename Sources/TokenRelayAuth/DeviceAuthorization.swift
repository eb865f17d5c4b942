import FoundationEssentials
import TokenRelayHTTP
import TokenRelayJSONRPC
import TokenRelayLogging

/// A validated RFC 8628 §3.2 device authorization response.
struct DeviceAuthorization: Sendable, Equatable {
    /// The device verification code (a secret: registered with the redactor).
    let deviceCode: String
    /// The code the person enters.
    let userCode: String
    /// Where the person enters it.
    let verificationURI: String
    /// The same with the code filled in, if given.
    let verificationURIComplete: String?
    /// Seconds the codes stay valid.
    let expiresIn: Int
    /// Seconds between polls (default 5, at least 1).
    let interval: Int

    /// The longest `user_code` accepted, in UTF-8 bytes (RFC 8628 §6.1 suggests about 8 characters; a
    /// person types it).
    static let maximumUserCodeBytes = 64

    /// Parses a 200 body. Never puts the body into an error.
    static func parse(_ body: [UInt8]) throws(AuthError) -> DeviceAuthorization {
        let object: JSONObject
        do {
            object = try TokenResponseParser.jsonObject(body)
        } catch {
            throw .invalidTokenResponse("the device authorization response is not one JSON object")
        }
        // Every text here is shown to a person: one with a control or bidirectional formatting
        // character is refused (not cleaned: a cleaned code or URL would not work).
        func string(_ name: String) throws(AuthError) -> String {
            guard let value = object[name]?.stringValue, !value.isEmpty, !ServerText.containsUnsafeCharacter(value)
            else {
                throw .invalidTokenResponse("the device authorization response has no usable \(name)")
            }
            return value
        }
        let deviceCode = try string("device_code")
        Redactor.shared.register(deviceCode)
        let userCode = try string("user_code")
        guard userCode.utf8.count <= maximumUserCodeBytes else {
            throw .invalidTokenResponse("the user_code is longer than \(maximumUserCodeBytes) bytes")
        }
        let verificationURI = try string(object["verification_uri"] == nil ? "verification_url" : "verification_uri")
        var complete: String?
        if object["verification_uri_complete"] != nil { complete = try string("verification_uri_complete") }
        // Opened in the person's browser, so read by libcurl's URL API (the process's one URL
        // parser): an absolute URL with a host and no user information, https or (loopback only)
        // http, like any endpoint. (A fragment is allowed here: a browser never sends it.)
        for (url, name) in [(verificationURI, "verification_uri"), (complete, "verification_uri_complete")] {
            guard let url else { continue }
            guard let parsed = try? ParsedURL(url), parsed.scheme == "https" || parsed.isLoopback else {
                throw .invalidTokenResponse("the \(name) is not an https (or loopback http) URL")
            }
        }
        guard let expiresIn = try TokenResponseParser.parseExpiresIn(object["expires_in"]) else {
            throw .invalidTokenResponse("the device authorization response has no expires_in")
        }
        var interval = 5
        if let value = object["interval"], value != .null {
            guard let number = value.numberValue, number.doubleValue.isFinite, number.doubleValue >= 0,
                number.doubleValue <= 3600
            else { throw .invalidTokenResponse("interval is not a number of seconds") }
            interval = max(1, Int(number.doubleValue.rounded(.up)))
        }
        return DeviceAuthorization(
            deviceCode: deviceCode, userCode: userCode, verificationURI: verificationURI,
            verificationURIComplete: complete, expiresIn: expiresIn, interval: interval)
    }
}

extension TokenEndpointClient {
    /// Sends the device authorization request (retrying transient failures like token requests).
    func deviceAuthorization(_ request: HTTPRequest, deadline: Date) async throws -> DeviceAuthorization {
        var attempt = 0
        while true {
            attempt += 1
            guard let timeout = clock.requestTimeout(until: deadline) else { throw AuthError.timeout }
            var attemptRequest = request
            attemptRequest.timeout = timeout
            let failure: AuthError
            do {
                let response = try await AuthorizationServerCall.send(
                    attemptRequest, to: "device authorization endpoint", over: transport)
                let status = response.status
                if status == 200 { return try DeviceAuthorization.parse(response.body) }
                let answer = AuthorizationServerCall.refusal(response, from: "device authorization endpoint")
                guard AuthorizationServerCall.isTransient(status: status) else { throw answer }
                failure = answer
            } catch AuthError.endpoint(let endpoint, let cause) {
                // The same rule as the token endpoint: a TLS failure or an unusable request is final.
                guard cause.isRetryable else { throw AuthError.endpoint(endpoint, cause) }
                if case .timeout = cause, clock.now >= deadline { throw AuthError.timeout }
                failure = .endpoint(endpoint, cause)
            }
            guard attempt < retryPolicy.maximumAttempts else { throw failure }
            let wake = clock.now.addingTimeInterval(retryPolicy.delay(retry: attempt, random: random()))
            guard wake < deadline else { throw failure }
            try await clock.sleep(until: wake)
        }
    }
}
