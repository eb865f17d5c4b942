import Testing
@testable import JSONRPC

@Test func placeholder() {}
