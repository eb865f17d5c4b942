import Foundation
import Testing

/// `--help`, the man page and the completions against what the real binary's parser accepts: all
/// come from one table (Sources/tokenrelay/CommandTable.swift), and these tests fail when any of
/// them drifts from the parser.
@Suite struct CommandLineDocumentationTests {
    /// Runs the binary to completion with no config anywhere.
    static func run(_ arguments: [String]) async throws -> (code: Int32, stdout: String, stderr: String) {
        let process = try RelayProcess(arguments, testMethods: false)
        try process.closeStdin()
        let code = try await process.exitCode()
        return (code, process.stdoutText, process.stderrText)
    }

    /// One option as a command's `--help` prints it: its spellings and whether it takes a value.
    struct HelpOption: Hashable {
        var names: [String]
        var takesValue: Bool
    }

    /// The commands the global `--help` lists (`store new-key` as two words).
    static func commands() async throws -> [String] {
        let help = try await run(["--help"]).stdout
        let section = help.components(separatedBy: "Commands:\n").last?.components(separatedBy: "\n\n").first ?? ""
        return section.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard let first = words.first else { return nil }
            // `store new-key  print ...`: a subcommand is the second word when two spaces follow it.
            if words.count > 1, line.contains("\(words[0]) \(words[1])  ") { return "\(words[0]) \(words[1])" }
            return String(first)
        }
    }

    /// The options a command's `--help` names (not `--help` itself).
    static func options(of command: String) async throws -> [HelpOption] {
        let help = try await run(command.split(separator: " ").map(String.init) + ["--help"])
        #expect(help.code == 0, "\(command) --help: \(help.stderr)")
        return help.stdout.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  -") else { return nil }
            // "  -H, --header 'NAME: VALUE'  add a header": spellings, then the placeholder or help.
            let head = line.dropFirst(2).components(separatedBy: "  ")[0]
            var names: [String] = []
            var rest = Substring(head)
            while rest.hasPrefix("-") {
                let end = rest.firstIndex { $0 == "," || $0 == " " } ?? rest.endIndex
                names.append(String(rest[..<end]))
                rest = rest[end...].drop { $0 == "," || $0 == " " }
            }
            if names.contains("--help") { return nil }
            return HelpOption(names: names, takesValue: !rest.isEmpty)
        }
    }

    /// A value each option accepts (most take any word).
    static let values = [
        "--format": "raw", "--log-level": "error", "--framing": "ndjson", "--log-format": "text",
        "--timeout": "5", "-H": "X-Test: 1", "--query": "a=b", "--json": "{}", "--min-valid": "60s",
    ]
    /// The positional arguments each command needs.
    static let positionals = ["call": ["GET", "/"], "subscribe": ["/"]]

    @Test func theGlobalHelpListsEveryCommand() async throws {
        let commands = try await Self.commands()
        for command in [
            "serve", "check-config", "call", "subscribe", "token", "login", "status", "logout", "store new-key",
            "store rekey",
        ] {
            #expect(commands.contains(command), "\(commands)")
        }
    }

    /// The options users rely on that once were missing from `call --help` (issue 36).
    @Test func callHelpNamesItsTimeoutNoAuthAndConfig() async throws {
        let names = try await Self.options(of: "call").flatMap(\.names)
        for name in ["--timeout", "--no-auth", "--config", "--env", "--profile", "-H", "--query", "-v"] {
            #expect(names.contains(name), "\(names)")
        }
    }

    /// Every option a command's `--help` names is one its parser takes (with a value when help
    /// shows one), and an option help does not name is refused: so the parser accepts exactly
    /// what help names.
    @Test func everyCommandsHelpNamesExactlyTheOptionsItsParserAccepts() async throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("tokenrelay-no-such.yaml").path
        for command in try await Self.commands() {
            let words = command.split(separator: " ").map(String.init)
            let tail = ["--config", missing] + (Self.positionals[command] ?? [])
            for option in try await Self.options(of: command) {
                for name in option.names {
                    let value = option.takesValue ? [Self.values[option.names[0]] ?? "x"] : []
                    let arguments = words + [name] + value + (command == "store new-key" ? [] : tail)
                    let result = try await Self.run(arguments)
                    for refusal in ["unknown option", "unknown argument", "takes no value", "needs a value"] {
                        #expect(!result.stderr.contains(refusal), "\(arguments): \(result.stderr)")
                    }
                }
            }
            let refused = try await Self.run(words + ["--no-such-option"])
            #expect(refused.code == 2, "\(command)")
            #expect(refused.stderr.contains("unknown option '--no-such-option'"), "\(command): \(refused.stderr)")
        }
    }

    @Test func aMistypedOptionOrCommandGetsADidYouMean() async throws {
        let option = try await Self.run(["call", "--timout", "5", "GET", "/"])
        #expect(option.code == 2)
        #expect(option.stderr.contains("did you mean '--timeout'?"), "\(option.stderr)")
        #expect(option.stderr.contains("tokenrelay call --help"), "\(option.stderr)")
        let command = try await Self.run(["subscrbe", "/"])
        #expect(command.code == 2)
        #expect(command.stderr.contains("did you mean 'subscribe'?"), "\(command.stderr)")
    }

    /// The man page and the three completions name every command and every option help names.
    @Test func theManPageAndTheCompletionsNameEveryOption() async throws {
        let man = try await Self.run(["__man"]).stdout
        let scripts = [
            "bash": try await Self.run(["__completions", "bash"]).stdout,
            "zsh": try await Self.run(["__completions", "zsh"]).stdout,
            "fish": try await Self.run(["__completions", "fish"]).stdout,
        ]
        for command in try await Self.commands() {
            #expect(man.contains(".SS \(command.replacingOccurrences(of: "-", with: "\\-"))"), "\(command)")
            for name in try await Self.options(of: command).flatMap(\.names) {
                #expect(man.contains(name.replacingOccurrences(of: "-", with: "\\-")), "man: \(command) \(name)")
                #expect(scripts["bash"]?.contains(name) == true, "bash: \(command) \(name)")
                #expect(scripts["zsh"]?.contains(name) == true, "zsh: \(command) \(name)")
                let fishName = name.hasPrefix("--") ? "-l \(name.dropFirst(2))" : "-s \(name.dropFirst())"
                #expect(scripts["fish"]?.contains(fishName) == true, "fish: \(command) \(name)")
            }
        }
        #expect(try await Self.run(["__completions", "tcsh"]).code == 2)
    }

    /// bash offers the commands and a command's options through `compgen`, and the zsh and fish
    /// scripts parse (`zsh -n`, `fish -n`; each skipped when that shell is missing).
    @Test func theCompletionScriptsRunInTheirShells() async throws {
        let root = try TemporaryDirectory.make()
        for shell in ["bash", "zsh", "fish"] {
            let script = try await Self.run(["__completions", shell]).stdout
            try script.write(to: root.appendingPathComponent(shell), atomically: true, encoding: .utf8)
        }
        func complete(_ words: [String]) async throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let program =
                "source \(root.appendingPathComponent("bash").path); COMP_WORDS=(\(quoted)); "
                + "COMP_CWORD=\(words.count - 1); _tokenrelay; printf '%s\\n' \"${COMPREPLY[@]}\""
            let result = try await InteropStack.run(
                "/bin/bash", ["--norc", "-c", program], in: root, timeout: .seconds(60))
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.split(separator: "\n").map(String.init)
        }
        #expect(try await complete(["tokenrelay", ""]).contains("call"))
        #expect(try await complete(["tokenrelay", "su"]) == ["subscribe"])
        #expect(try await complete(["tokenrelay", "call", "--ti"]) == ["--timeout"])
        #expect(try await complete(["tokenrelay", "token", "--format", "ex"]) == ["exec-credential"])
        #expect(try await complete(["tokenrelay", "store", ""]).sorted() == ["new-key", "rekey"])
        #expect(
            try await complete(["tokenrelay", "store", "rekey", "--new-key-"]).sorted() == [
                "--new-key-env", "--new-key-file", "--new-key-keyring",
            ])
        for (shell, binary) in [("zsh", "/usr/bin/zsh"), ("fish", "/usr/bin/fish")]
        where FileManager.default.isExecutableFile(atPath: binary) {
            let result = try await InteropStack.run(
                binary, ["-n", root.appendingPathComponent(shell).path], in: root, timeout: .seconds(60))
            #expect(result.status == 0, "\(shell) -n: \(result.stderr)")
        }
        // fish completes through its own `complete -C`.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/fish") {
            let script = root.appendingPathComponent("fish").path
            let result = try await InteropStack.run(
                "/usr/bin/fish", ["--no-config", "-c", "source \(script); complete -C 'tokenrelay call --ti'"],
                in: root, timeout: .seconds(60))
            #expect(result.stdout.hasPrefix("--timeout\t"), "\(result.stdout) \(result.stderr)")
        }
    }
}
