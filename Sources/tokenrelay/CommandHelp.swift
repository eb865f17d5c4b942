import TokenRelayServer

/// `--help`, the man page and the shell completions, each rendered from ``CommandTable``: none of
/// them is written by hand, so none can name an option the parser refuses or miss one it takes.
enum CommandHelp {
    /// The usage line of `command`: `tokenrelay call [OPTIONS] METHOD PATH`.
    static func usageLine(_ command: CommandSpec) -> String {
        var line = "tokenrelay \(command.name)"
        if !command.options.isEmpty { line += " [OPTIONS]" }
        if !command.arguments.isEmpty { line += " \(command.arguments)" }
        return line
    }

    /// The global `--help`: every command with its summary.
    static var global: String {
        let width = (CommandTable.commands.map(\.name.count).max() ?? 0) + 2
        var lines = [
            "Usage: tokenrelay [COMMAND] [OPTIONS] [ARGUMENTS]",
            "",
            "Holds authenticated HTTP sessions for other programs: serves JSON-RPC 2.0 on stdin/stdout",
            "(the default command), or runs one command for a shell user.",
            "",
            "Commands:",
        ]
        for command in CommandTable.commands {
            lines.append("  " + command.name.padding(toLength: width) + command.summary)
        }
        lines += [
            "",
            "  tokenrelay COMMAND --help    the options of one command",
            "  tokenrelay --version         the version",
            "",
            "See man tokenrelay, and README.md.",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `tokenrelay COMMAND --help`: the usage line, what it does, and every option it takes.
    static func text(for command: CommandSpec) -> String {
        let summary = command.summary.prefix(1).uppercased() + command.summary.dropFirst() + "."
        var lines = ["Usage: \(usageLine(command))", "", summary]
        if !command.details.isEmpty { lines += [""] + wrapped(command.details, width: 92) }
        if !command.options.isEmpty {
            lines += ["", "Options:"]
            let column = width(command)
            for option in command.options {
                let synopsis = option.synopsis
                let help = wrapped(option.help, width: 92 - column)
                let indent = String(repeating: " ", count: column + 2)
                if synopsis.count + 2 > column {
                    lines.append("  \(synopsis)")
                    lines += help.map { indent + $0 }
                } else {
                    lines.append("  " + synopsis.padding(toLength: column) + help[0])
                    lines += help.dropFirst().map { indent + $0 }
                }
            }
        }
        lines += ["", "  -h, --help".padding(toLength: width(command) + 2) + "show this help"]
        return lines.joined(separator: "\n") + "\n"
    }

    /// The column option descriptions start at.
    private static func width(_ command: CommandSpec) -> Int {
        min(30, max("-h, --help".count, command.options.map(\.synopsis.count).max() ?? 0) + 2)
    }

    /// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole).
    static func wrapped(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        return lines.isEmpty || !line.isEmpty ? lines + [line] : lines
    }

    /// The help `arguments` ask for after `--help`/`-h`/`help`: a command's (`call --help`,
    /// `help call`, `store rekey --help`), else the global one. `command` is the first word.
    static func text(command: String, arguments: [String]) -> String {
        var words = command == "help" ? arguments.filter { !$0.hasPrefix("-") } : [command]
        if command != "help", let sub = arguments.first, !sub.hasPrefix("-") { words.append(sub) }
        for count in stride(from: min(2, words.count), through: 1, by: -1) {
            if let spec = CommandTable.command(words.prefix(count).joined(separator: " ")) { return text(for: spec) }
        }
        // `store --help`: its subcommands.
        if let first = words.first {
            let subcommands = CommandTable.commands.filter { $0.name.hasPrefix(first + " ") }
            if !subcommands.isEmpty { return subcommands.map { text(for: $0) }.joined(separator: "\n") }
        }
        return global
    }
}

extension String {
    /// The string padded with spaces to `length` (unchanged when already that long).
    func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
