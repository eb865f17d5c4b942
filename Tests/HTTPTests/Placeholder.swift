import Testing
@testable import HTTP

@Test func placeholder() {}
