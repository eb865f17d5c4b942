import Testing

@testable import TokenRelayHTTP

/// How libcurl's error text becomes an error message.
@Suite struct CurlEventLoopTests {
    @Test func libcurlErrorTextIsBoundedAndCleanedLikeServerText() {
        // libcurl quotes what the server sent ("Received HTTP/0.9 ...", a certificate's names).
        let quoted = "Unsupported response: " + String(repeating: "A\r\nX-Injected: 1 ", count: 500)
        let message = CurlEventLoop.errorMessage(quoted)
        #expect(message.utf8.count <= 256)
        #expect(message.hasPrefix("Unsupported response: A  X-Injected"))
        #expect(!message.contains("\r") && !message.contains("\n"))
        #expect(
            CurlEventLoop.errorMessage("Could not resolve host: example.invalid")
                == "Could not resolve host: example.invalid")
    }
}
