import Foundation
import Testing

/// README.md as a front door (issue 36): short enough to read, and every link it gives leads
/// somewhere: a file or folder the repository has, or a heading of the README itself.
@Suite struct ReadmeTests {
    static let root = ExitCodesTests.repositoryRoot

    static func readme() throws -> String {
        try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// The targets of `[text](target)` links, outside code blocks.
    static func links(in markdown: String) -> [String] {
        var targets: [String] = []
        var inCode = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode else { continue }
            var rest = Substring(line)
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[after.index(after: close)...]
            }
        }
        return targets
    }

    /// GitHub's anchor of a heading: lower-cased, punctuation dropped, spaces as hyphens.
    static func anchor(_ heading: String) -> String {
        String(
            heading.lowercased().compactMap { character -> Character? in
                if character == " " { return "-" }
                if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
                return nil
            })
    }

    @Test func theReadmeIsUnderFiveHundredLines() throws {
        let count = try Self.readme().split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(count < 500, "README.md has \(count) lines")
    }

    @Test func everyLinkLeadsToAFileOrAHeadingThatExists() throws {
        let readme = try Self.readme()
        let anchors = Set(
            readme.split(separator: "\n").filter { $0.hasPrefix("#") }.map {
                Self.anchor(String($0.drop { $0 == "#" }.dropFirst()))
            })
        let targets = Self.links(in: readme)
        #expect(!targets.isEmpty)
        for target in targets where !target.hasPrefix("http://") && !target.hasPrefix("https://") {
            if target.hasPrefix("#") {
                #expect(anchors.contains(String(target.dropFirst())), "no heading for \(target)")
            } else {
                let path = String(target.split(separator: "#", maxSplits: 1)[0])
                #expect(
                    FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path),
                    "README links to \(path), which the repository lacks")
            }
        }
    }
}
