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

    /// README's Layout names every target of `Sources/` (by name, as `…Suffix` of a
    /// `TokenRelay…` module, or as the `Fuzz*` family), so the front door cannot fall behind the
    /// package (issue 46).
    @Test func theLayoutNamesEveryTarget() throws {
        let readme = try Self.readme()
        let layout = try #require(readme.components(separatedBy: "## Layout").last)
        let targets = try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Sources").path)
        #expect(targets.count > 20)
        for target in targets where !target.hasPrefix(".") {
            let suffix = target.hasPrefix("TokenRelay") ? "…" + target.dropFirst("TokenRelay".count) : target
            let named =
                layout.contains("`\(target)`") || layout.contains("`\(suffix)`")
                || (target.hasPrefix("Fuzz") && layout.contains("`Fuzz*`"))
                || (target.hasPrefix("Bare") && layout.contains("`Bare*Echo`"))
            #expect(named, "README's Layout does not name the target \(target)")
        }
    }

    /// docs/README.md indexes every guide of docs/.
    @Test func theDocsIndexLinksEveryGuide() throws {
        let docs = Self.root.appendingPathComponent("docs")
        let index = try String(contentsOf: docs.appendingPathComponent("README.md"), encoding: .utf8)
        let linked = Set(Self.links(in: index))
        for guide in try FileManager.default.contentsOfDirectory(atPath: docs.path)
        where guide.hasSuffix(".md") && guide != "README.md" {
            #expect(linked.contains(guide), "docs/README.md does not link \(guide)")
        }
    }
}
