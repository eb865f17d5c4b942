import Foundation
import TokenRelayLogging

/// `redactor --tokens N [--lines L]`: the redactor's cost per log line with N registered tokens
/// (JWT-sized, random tails) plus a few configured secrets. A 200-byte line with no secret (the
/// common case) and one with a secret in it; and the cost of one registration at that size.
enum RedactorBench {
    static func run(tokens count: Int, lines: Int) -> [String: Any] {
        let redactor = Redactor(tokenCapacity: max(count, 1))
        for index in 0..<4 { redactor.register("configured-secret-\(index)-\(UUID().uuidString)") }
        let header = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
        let tokens = (0..<count).map { _ in
            header + (0..<18).map { _ in UUID().uuidString.replacingOccurrences(of: "-", with: "") }.joined()
        }
        let registerStart = DispatchTime.now().uptimeNanoseconds
        redactor.registerTokens(tokens)
        let bulkMs = Double(DispatchTime.now().uptimeNanoseconds - registerStart) / 1e6
        let fresh = (0..<20).map { _ in header + UUID().uuidString + UUID().uuidString }
        let oneStart = DispatchTime.now().uptimeNanoseconds
        for token in fresh { redactor.registerToken(token) }
        let oneMs = Double(DispatchTime.now().uptimeNanoseconds - oneStart) / 1e6 / Double(fresh.count)

        let clean =
            "tokenrelay debug: http response method=GET url=https://api.example.com/v1/items?page=2 "
            + "status=200 elapsedMs=12.4 user=alice@example.com request-id=6f1c2d3e-4b5a-6978-8190-a1b2c3d4e5f6"
        let dirty = "tokenrelay warn: refused: " + (tokens.last ?? "none") + " was rejected by the server"
        func perLine(_ line: String) -> Double {
            var sink = 0
            for _ in 0..<min(lines, 1000) { sink &+= redactor.redact(line).utf8.count }  // warm-up
            let start = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<lines { sink &+= redactor.redact(line).utf8.count }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
            precondition(sink > 0)
            return elapsed / Double(lines)
        }
        let cleanNs = perLine(clean)
        let dirtyNs = perLine(dirty)
        return [
            "tokens": count, "line_bytes": clean.utf8.count, "clean_line_ns": rounded(cleanNs, 0),
            "clean_ns_per_byte": rounded(cleanNs / Double(clean.utf8.count), 2),
            "secret_line_ns": rounded(dirtyNs, 0), "register_all_ms": rounded(bulkMs, 1),
            "register_one_ms": rounded(oneMs, 2),
        ]
    }
}
