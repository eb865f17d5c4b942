import Testing

@testable import TokenRelayConfig

/// Parses `text`, failing the test on a YAML error.
func parseTree(_ text: String) throws -> YAMLNode {
    let node = try YAMLParser().parse(text)
    return try #require(node)
}

/// The YAML error `text` produces, if any.
func parseError(_ text: String, parser: YAMLParser = YAMLParser()) -> YAMLError? {
    do {
        _ = try parser.parse(text)
        return nil
    } catch {
        return error
    }
}

@Suite struct YAMLParserTests {
    @Test func nestedNodesCarryOneBasedMarks() throws {
        let root = try parseTree(
            """
            top:
              inner:
                - first
                - key: value
            """)
        #expect(root.mark == SourceMark(line: 1, column: 1))
        let inner = try #require(root["top"]?["inner"])
        #expect(inner.mark == SourceMark(line: 3, column: 5))
        let second = try #require(inner.items?[1])
        #expect(second.mark == SourceMark(line: 4, column: 7))
        #expect(second["key"]?.mark == SourceMark(line: 4, column: 12))
        #expect(second["key"]?.scalar?.value == "value")
    }

    @Test(arguments: [
        ("plain: 30", "30", ScalarStyle.plain),
        ("single: '30'", "30", .singleQuoted),
        ("double: \"a\\tb\"", "a\tb", .doubleQuoted),
        ("literal: |\n  one\n  two\n", "one\ntwo\n", .literal),
        ("literalStrip: |-\n  one\n  two\n", "one\ntwo", .literal),
        ("folded: >\n  one\n  two\n", "one two\n", .folded),
        ("multiline: plain\n  continued", "plain continued", .plain),
    ])
    func everyScalarStyleKeepsItsStyleAndText(yaml: String, value: String, style: ScalarStyle) throws {
        let root = try parseTree(yaml)
        let scalar = try #require(root.pairs?.first?.value.scalar)
        #expect(scalar.value == value)
        #expect(scalar.style == style)
    }

    @Test func tagsAreResolvedToLongForm() throws {
        let root = try parseTree("a: !!str 30\nb: !!int \"7\"")
        #expect(root["a"]?.tag == YAMLNode.stringTag)
        #expect(root["b"]?.tag == YAMLNode.intTag)
    }

    @Test func aliasesRepeatTheAnchoredNode() throws {
        let root = try parseTree(
            """
            base: &base { a: 1, b: [x, y] }
            copy: *base
            """)
        #expect(root["copy"]?["b"]?.items?.count == 2)
        #expect(root["copy"]?["a"]?.scalar?.value == "1")
    }

    @Test func undefinedAliasIsAnErrorAtItsMark() throws {
        let error = try #require(parseError("a: 1\nb: *nowhere\n"))
        #expect(error.mark == SourceMark(line: 2, column: 4))
        #expect(error.message.contains("undefined alias '*nowhere'"))
    }

    @Test func mergeKeyWithOneMapKeepsExplicitKeysAndPosition() throws {
        let root = try parseTree(
            """
            defaults: &d { timeout: 10s, retries: 3 }
            env:
              name: x
              <<: *d
              timeout: 30s
            """)
        let env = try #require(root["env"]?.pairs)
        #expect(env.map { $0.key.scalar?.value } == ["name", "retries", "timeout"])
        #expect(root["env"]?["timeout"]?.scalar?.value == "30s")
    }

    @Test func mergeKeyWithAListGivesEarlierMapsPriority() throws {
        let root = try parseTree(
            """
            a: &a { x: from-a }
            b: &b { x: from-b, y: from-b }
            m:
              <<: [*a, *b]
            """)
        #expect(root["m"]?["x"]?.scalar?.value == "from-a")
        #expect(root["m"]?["y"]?.scalar?.value == "from-b")
    }

    @Test func quotedMergeKeyIsAnOrdinaryKey() throws {
        let root = try parseTree("m:\n  '<<': 1\n")
        #expect(root["m"]?["<<"]?.scalar?.value == "1")
    }

    @Test func mergeOfAScalarIsAnError() {
        let error = parseError("m:\n  <<: nope\n")
        #expect(error?.message.contains("merge key") == true)
        #expect(error?.mark.line == 2)
    }

    @Test func tabIndentationPointsAtTheTabWithAHint() throws {
        let error = try #require(parseError("version: 1\nenvironments:\n\tstaging: {}\n"))
        #expect(error.mark.line == 3)
        #expect(error.message.contains("tabs"))
    }

    @Test func badIndentationIsReportedAtItsLine() throws {
        let error = try #require(parseError("a:\n  b: 1\n c: 2\n"))
        #expect(error.mark.line == 3)
        #expect(error.message.hasPrefix("invalid YAML"))
    }

    @Test func unclosedQuoteIsAnError() {
        #expect(parseError("a: \"open\nb: 1\n") != nil)
    }

    @Test func aStructuralErrorIsNotMaskedByASyntaxErrorFurtherOn() throws {
        // The undefined alias on line 1 comes before the unclosed bracket on line 3: the tree is
        // built from each event as libyaml reads it, so the parse stops at the alias. (libyaml
        // reads a token or so ahead: a syntax error right behind the alias still comes first.)
        let error = try #require(parseError("a: *nowhere\nb: 1\nc: [unclosed\n"))
        #expect(error.mark.line == 1)
        #expect(error.message.contains("undefined alias '*nowhere'"))
        let syntax = try #require(parseError("a: 1\nc: [unclosed\n"))
        #expect(syntax.message.contains("invalid YAML"))
    }

    @Test func secondDocumentIsRejected() throws {
        let error = try #require(parseError("a: 1\n---\nb: 2\n"))
        #expect(error.mark.line == 2)
        #expect(error.message.contains("single document"))
    }

    @Test func emptyAndCommentOnlyInputsHaveNoRoot() throws {
        #expect(try YAMLParser().parse("") == nil)
        #expect(try YAMLParser().parse("# nothing\n") == nil)
    }

    @Test func aliasBombIsRefused() throws {
        var text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...8 {
            let previous = "*a\(level - 1)"
            text += "a\(level): &a\(level) [\(Array(repeating: previous, count: 10).joined(separator: ", "))]\n"
        }
        let error = try #require(parseError(text))
        #expect(error.message.contains("alias bomb"))
    }

    @Test func expansionLimitIsConfigurable() {
        let text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
        #expect(parseError(text, parser: YAMLParser(maxExpandedNodes: 10)) != nil)
        #expect(parseError(text, parser: YAMLParser(maxExpandedNodes: 100)) == nil)
    }

    @Test func deepNestingIsRefused() {
        let text = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        #expect(parseError(text)?.message.contains("nesting") == true)
    }
}
