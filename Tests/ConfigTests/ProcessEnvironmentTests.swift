import Foundation
import Testing

@testable import Config

@Suite struct ProcessEnvironmentTests {
    @Test func theEnvironmentReadFromEnvironIsFoundationsEnvironment() {
        // Foundation's reading is the reference; start-up reads `environ` itself to avoid it.
        #expect(ProcessEnvironment.current() == ProcessInfo.processInfo.environment)
    }
}
