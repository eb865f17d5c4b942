import Testing

@testable import TokenRelayAuth

@Suite struct DeviceAuthorizationTests {
    static func body(
        verificationURI: String, complete: String? = nil, interval: String = "5", userCode: String = "ABCD-EFGH"
    ) -> [UInt8] {
        var text = #"{"device_code":"dc-1","user_code":"\#(userCode)","verification_uri":"\#(verificationURI)","#
        if let complete { text += #""verification_uri_complete":"\#(complete)","# }
        text += #""expires_in":600,"interval":\#(interval)}"#
        return Array(text.utf8)
    }

    @Test(arguments: ["https://as.example/device", "http://127.0.0.1:8000/o/device", "HTTPS://AS.example/d?x=1"])
    func anHTTPVerificationURIIsAccepted(uri: String) throws {
        let parsed = try DeviceAuthorization.parse(Self.body(verificationURI: uri, complete: uri + "#c"))
        #expect(parsed.verificationURI == uri)
        #expect(parsed.interval == 5)
    }

    /// Opened in the person's browser: anything but an absolute http(s) URL with a host and no
    /// user information is refused, read by the same parser the transport uses.
    @Test(arguments: [
        "javascript:alert(1)", "file:///etc/passwd", "ftp://as.example/", "/device", "https://",
        "https://u:p@as.example/",
        "https://as.example/\\u0000x", "data:text/html,x",
        // Plain http off loopback, as for any endpoint; C1 and bidirectional formatting characters.
        "http://as.example/device", "http://192.168.1.10/device", "https://as.example/\\u009b31m",
        "https://as.example/\\u202egnp.exe",
    ])
    func anythingElseIsRefused(uri: String) {
        #expect(throws: AuthError.self) { try DeviceAuthorization.parse(Self.body(verificationURI: uri)) }
        #expect(throws: AuthError.self) {
            try DeviceAuthorization.parse(Self.body(verificationURI: "https://as.example/d", complete: uri))
        }
    }

    @Test(arguments: ["true", "\"5\"", "-1", "3601", "null"])
    func anIntervalThatIsNotSecondsIsRefusedOrDefaulted(interval: String) {
        let result = Result {
            try DeviceAuthorization.parse(Self.body(verificationURI: "https://a.example/", interval: interval))
        }
        if interval == "null" {
            #expect((try? result.get())?.interval == 5)
        } else {
            #expect(throws: AuthError.self) { try result.get() }
        }
    }

    /// A person reads and types the user code: bounded, and shown only without control or
    /// bidirectional formatting characters.
    @Test(arguments: [
        String(repeating: "A", count: 65), "ABCD\\u0085EFGH", "ABCD\\u001b[2J", "ABCD\\u2067EFGH", "",
    ])
    func anUnusableUserCodeIsRefused(code: String) {
        #expect(throws: AuthError.self) {
            try DeviceAuthorization.parse(Self.body(verificationURI: "https://a.example/", userCode: code))
        }
    }

    @Test func aUserCodeOf64BytesIsAccepted() throws {
        let code = String(repeating: "A", count: 64)
        let parsed = try DeviceAuthorization.parse(Self.body(verificationURI: "https://a.example/", userCode: code))
        #expect(parsed.userCode == code)
    }
}
