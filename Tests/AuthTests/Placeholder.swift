import Testing
@testable import Auth

@Test func placeholder() {}
