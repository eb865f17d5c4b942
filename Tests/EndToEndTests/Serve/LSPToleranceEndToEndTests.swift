import Foundation
import Testing

@testable import TokenRelayJSONRPC

/// The real binary spoken to the way editors' own JSON-RPC clients speak (SPEC §4.1, §4.2):
/// LSP `initialize` params, `"params": null`, `[]` for `{}`, and invalid notifications that
/// must get no answer at all.
@Suite struct LSPToleranceEndToEndTests {
    /// Splits Content-Length frames (the test's own reader, independent of the server's framer).
    static func lspFrames(_ bytes: [UInt8]) throws -> [JSONValue] {
        var frames: [JSONValue] = []
        var rest = bytes[...]
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            guard let headerEnd = rest.firstRange(of: separator) else { throw Malformed(text: "no header end") }
            let header = String(decoding: rest[..<headerEnd.lowerBound], as: UTF8.self)
            guard let lengthLine = header.split(separator: "\r\n").first(where: { $0.hasPrefix("Content-Length: ") }),
                let length = Int(lengthLine.dropFirst("Content-Length: ".count)),
                rest.count >= headerEnd.upperBound - rest.startIndex + length
            else { throw Malformed(text: header) }
            let body = rest[headerEnd.upperBound..<(headerEnd.upperBound + length)]
            frames.append(try JSONParser.parse(Array(body)))
            rest = rest[(headerEnd.upperBound + length)...]
        }
        return frames
    }

    struct Malformed: Error { let text: String }

    static func lsp(_ json: String) -> String { "Content-Length: \(json.utf8.count)\r\n\r\n\(json)" }

    @Test func lspClientSessionWithNullAndEmptyArrayParamsEndsWithExitCodeZero() async throws {
        let relay = try RelayProcess()
        let messages = [
            #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootPath":null,"rootUri":null,"workspaceFolders":null,"initializationOptions":[],"clientInfo":{"name":"Neovim","version":"0.7.2"},"capabilities":[],"trace":"off","workDoneToken":"1","locale":"en"}}"#,
            #"{"jsonrpc":"2.0","method":"initialized","params":[]}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"ping","params":[]}"#,
            // Invalid notifications: never answered.
            #"{"jsonrpc":"2.0","method":"exit","params":"now"}"#,
            #"{"jsonrpc":"1.0","method":"ping"}"#,
            #"{"jsonrpc":"2.0","method":42}"#,
            #"{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"status","params":null}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"ping","params":{"rootUri":"file:///"}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"shutdown","params":null}"#,
            #"{"jsonrpc":"2.0","method":"exit","params":null}"#,
        ]
        // Everything up to shutdown at once; `exit` once shutdown is answered, as LSP clients do
        // (an earlier `exit` would cancel what is still running).
        try relay.write(messages.dropLast().map(Self.lsp).joined())
        try await relay.waitForStdout("5 answers") { bytes in ((try? Self.lspFrames(bytes)) ?? []).count >= 5 }
        try relay.write(Self.lsp(messages[messages.count - 1]))
        #expect(try await relay.exitCode() == 0)
        // One answer per request (none for the notifications), in whatever order they finished.
        let frames = try Self.lspFrames(relay.stdoutBytes)
        let byID = Dictionary(frames.map { ($0["id"]?.jsonText ?? "-", $0) }, uniquingKeysWith: { first, _ in first })
        #expect(frames.count == 5 && Set(byID.keys) == ["1", "2", "3", "4", "5"], "\(relay.stdoutText)")
        #expect(byID["1"]?["result"]?["serverInfo"]?["name"] == "tokenrelay")
        #expect(byID["2"]?["result"] == .object([:]))
        #expect(byID["3"]?["result"]?["sessions"] != nil)
        #expect(byID["4"]?["error"]?["code"] == .int(-32602), "tokenrelay's own methods stay strict")
        #expect(byID["5"]?["result"] == .null)
        #expect(byID["5"]?.objectValue?.members.contains { $0.key == "result" } == true)
    }

    @Test func ndjsonInvalidNotificationsGetNoAnswerAndShutdownWithNullParamsWorks() async throws {
        let relay = try RelayProcess()
        try relay.send(#"{"jsonrpc":"2.0","method":"initialized","params":null}"#)
        try relay.send(#"{"jsonrpc":"2.0","method":"exit","params":true}"#)
        try relay.send(#"[{"jsonrpc":"2.0","method":7},{"jsonrpc":"2.0","id":"b","method":"ping","params":null}]"#)
        try relay.send(#"{"jsonrpc":"2.0","id":"s","method":"shutdown","params":null}"#)
        // Two independent requests: their answers may come in either order.
        let lines = try await relay.lines(atLeast: 2)
        let batch = lines.first { $0.arrayValue != nil }
        #expect(batch?.arrayValue?.map { $0["id"] } == ["b"], "\(relay.stdoutText)")
        let shutdown = lines.first { $0["id"] == "s" }
        #expect(shutdown?["result"] == .null)
        #expect(shutdown?.objectValue?.members.contains { $0.key == "result" } == true)
        try relay.send(#"{"jsonrpc":"2.0","method":"exit","params":null}"#)
        #expect(try await relay.exitCode() == 0)
        #expect(relay.stdoutText.split(separator: "\n").count == 2, "\(relay.stdoutText)")
    }
}
