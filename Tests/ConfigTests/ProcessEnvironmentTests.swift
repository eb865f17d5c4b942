import Foundation
import Testing

@testable import Config

@Suite struct ProcessEnvironmentTests {
    @Test func theEnvironmentReadFromEnvironIsFoundationsEnvironment() {
        // Foundation's reading is the reference; start-up reads `environ` itself to avoid it.
        #expect(ProcessEnvironment.current() == ProcessInfo.processInfo.environment)
    }

    @Test func entriesAreSplitAtTheirFirstEqualsSignAndTheFirstOfANameWins() {
        let texts = ["A=1", "B=x=y=z", "EMPTY=", "NOEQUALS", "A=2", "UNICODE=é✓", "=nameless"]
        var pointers: [UnsafeMutablePointer<CChar>?] = texts.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        let variables = pointers.withUnsafeMutableBufferPointer { buffer -> [String: String] in
            guard let base = buffer.baseAddress else { return [:] }
            return ProcessEnvironment.variables(UnsafePointer(base))
        }
        #expect(variables == ["A": "1", "B": "x=y=z", "EMPTY": "", "UNICODE": "é✓", "": "nameless"])
    }
}
