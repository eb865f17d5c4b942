import Foundation
import Testing

@testable import TokenRelayConfig

@Suite struct ProcessEnvironmentTests {
    @Test func theEnvironmentReadFromEnvironIsFoundationsEnvironment() {
        // Foundation's reading is the reference; start-up reads `environ` itself to avoid it.
        #expect(ProcessEnvironment.current() == ProcessInfo.processInfo.environment)
    }

    @Test func entriesAreSplitAtTheirFirstEqualsSignAndTheFirstOfANameWins() {
        let texts = ["A=1", "B=x=y=z", "EMPTY=", "NOEQUALS", "A=2", "UNICODE=é✓", "=nameless"]
        // A value that is not UTF-8 (0xFF) is repaired with U+FFFD, as String(cString:) repairs it.
        let invalid = UnsafeMutablePointer<CChar>.allocate(capacity: 7)
        for (index, byte) in (Array("BAD=a".utf8) + [0xFF, 0]).enumerated() { invalid[index] = CChar(bitPattern: byte) }
        var pointers: [UnsafeMutablePointer<CChar>?] = texts.map { strdup($0) } + [invalid, nil]
        defer {
            for pointer in pointers.dropLast(2) { free(pointer) }
            invalid.deallocate()
        }
        let variables = pointers.withUnsafeMutableBufferPointer { buffer -> [String: String] in
            guard let base = buffer.baseAddress else { return [:] }
            return ProcessEnvironment.variables(UnsafePointer(base))
        }
        #expect(
            variables == ["A": "1", "B": "x=y=z", "EMPTY": "", "UNICODE": "é✓", "": "nameless", "BAD": "a\u{FFFD}"])
    }
}
