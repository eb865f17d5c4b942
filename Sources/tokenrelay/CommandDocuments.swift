import TokenRelayServer

/// The man page (`tokenrelay __man`) and the shell completions (`tokenrelay __completions
/// bash|zsh|fish`), rendered from ``CommandTable`` by the binary itself: `scripts/install` writes
/// what the installed binary prints, so an installed page or completion cannot drift from the
/// parser it describes.
enum CommandDocuments {
    // MARK: - Man page

    /// `tokenrelay.1` in roff (man(7) macros).
    static var manPage: String {
        var lines = [
            #".TH TOKENRELAY 1 "" "tokenrelay \#(RelayServer.version)" "User Commands""#,
            ".SH NAME",
            #"tokenrelay \- holds authenticated HTTP sessions for other programs"#,
            ".SH SYNOPSIS",
        ]
        for command in CommandTable.commands {
            lines += [".B \(roff(CommandHelp.usageLine(command)))", ".br"]
        }
        lines += [
            ".SH DESCRIPTION",
            roff(
                "tokenrelay keeps API keys, OAuth 2.0 tokens and logins for the programs that call HTTP APIs. "
                    + "Run as serve (the default), it speaks JSON-RPC 2.0 on stdin and stdout: an editor plugin "
                    + "or an agent asks it to make requests, and it attaches the credentials, renews tokens and "
                    + "follows event streams. The other commands do the same for a shell user."),
            ".SH COMMANDS",
        ]
        for command in CommandTable.commands {
            lines += [
                ".SS \(roff(command.name))", roff(CommandHelp.usageLine(command)), ".PP", roff(command.summary) + ".",
            ]
            if !command.details.isEmpty { lines += [".PP", roff(command.details)] }
            for option in command.options {
                lines += [".TP", ".B \(roff(option.synopsis))", roff(option.help)]
            }
        }
        lines += [
            ".SH OPTIONS", ".TP", #".B \-h, \-\-help"#, "show the help of the command (or the list of commands)",
            ".TP", #".B \-\-version"#, "print the version",
            ".SH EXIT STATUS",
            ".TP", "0", "success (call: a 2xx response)",
            ".TP", "1", "a session command failed",
            ".TP", "2", "a usage error",
            ".TP", "3", "the configuration is invalid, or names no such environment or profile",
            ".TP", "4, 5, 6", "call: the response status was 4xx, 5xx, or another",
            ".TP", "7", "the request or the token could not be had (connection, TLS, timeout, limit)",
            ".TP", "8", "credentials were refused, or the login failed",
            ".TP", "9", "token: the profile needs an interactive login first",
            ".SH ENVIRONMENT",
            ".TP", ".B TOKENRELAY_CONFIG", "the config file when --config is not given",
            ".TP", ".B XDG_CONFIG_HOME", "the config file is $XDG_CONFIG_HOME/tokenrelay/config.yaml by default",
            ".TP", ".B XDG_STATE_HOME", "the session store is $XDG_STATE_HOME/tokenrelay/sessions.db by default",
            ".SH FILES",
            ".TP", ".I ~/.config/tokenrelay/config.yaml", "the default config file",
            ".TP", ".I ~/.local/state/tokenrelay/sessions.db", "the default session store (SQLite, mode 0600)",
            ".SH SEE ALSO",
            "The README.md of the tokenrelay repository, and its schemas/ folder (config and OpenRPC schemas).",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` safe as roff text on its own line: backslashes and hyphens escaped, and a leading
    /// `.` or `'` (a request) made literal.
    static func roff(_ text: String) -> String {
        var escaped = text.replacing("\\", with: "\\e").replacing("-", with: "\\-")
        if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = "\\&" + escaped }
        return escaped
    }

    // MARK: - Completions

    /// The completion script for `shell` (`bash`, `zsh` or `fish`), or `nil` for another shell.
    static func completion(for shell: String) -> String? {
        switch shell {
        case "bash": bash
        case "zsh": zsh
        case "fish": fish
        default: nil
        }
    }

    /// Subcommands of `word` (`store` → `new-key`, `rekey`).
    private static func subcommands(of word: String) -> [String] {
        CommandTable.commands.compactMap { command in
            let words = command.name.split(separator: " ")
            return words.count == 2 && words[0] == word ? String(words[1]) : nil
        }
    }

    private static func words(_ completion: ValueCompletion) -> [String] {
        if case .choices(let words) = completion { return words }
        return []
    }

    /// `text` in single quotes for a POSIX shell or fish.
    private static func quoted(_ text: String) -> String {
        "'" + text.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
    }

    /// `text` in single quotes for bash or zsh (`'` as `'\''`).
    private static func shellQuoted(_ text: String) -> String {
        "'" + text.replacing("'", with: #"'\''"#) + "'"
    }

    static var bash: String {
        var lines = [
            "# bash completion for tokenrelay (generated by `tokenrelay __completions bash`)",
            "_tokenrelay() {",
            #"    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} command=serve first=2"#,
            #"    if [ "$COMP_CWORD" -eq 1 ] && [[ $cur != -* ]]; then"#,
            "        mapfile -t COMPREPLY < <(compgen -W \(shellQuoted(CommandTable.topLevelNames.joined(separator: " "))) -- \"$cur\")",
            "        return",
            "    fi",
            #"    [[ ${COMP_WORDS[1]} != -* ]] && command=${COMP_WORDS[1]}"#,
            #"    [[ ${COMP_WORDS[1]} == -* ]] && first=1"#,
        ]
        for parent in CommandTable.topLevelNames where !subcommands(of: parent).isEmpty {
            lines += [
                "    if [ \"$command\" = \(parent) ]; then",
                "        if [ \"$COMP_CWORD\" -eq 2 ]; then",
                "            mapfile -t COMPREPLY < <(compgen -W \(shellQuoted(subcommands(of: parent).joined(separator: " "))) -- \"$cur\")",
                "            return",
                "        fi",
                "        command=\"\(parent) ${COMP_WORDS[2]}\"",
                "    fi",
            ]
        }
        // The value of an option: its choices, a file, or nothing offered.
        lines.append(#"    case "$command|$prev" in"#)
        for command in CommandTable.commands {
            for option in command.options where option.value != nil {
                let patterns = option.names.map { "\"\(command.name)|\($0)\"" }.joined(separator: "|")
                switch option.completion {
                case .choices(let words):
                    lines.append(
                        "        \(patterns)) mapfile -t COMPREPLY < <(compgen -W \(shellQuoted(words.joined(separator: " "))) -- \"$cur\"); return ;;"
                    )
                case .file:
                    lines.append("        \(patterns)) mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); return ;;")
                case .none:
                    lines.append("        \(patterns)) COMPREPLY=(); return ;;")
                }
            }
        }
        lines += ["    esac", "    local options arguments=", #"    case "$command" in"#]
        for command in CommandTable.commands {
            let options = command.options.flatMap(\.names) + ["--help"]
            var line = "        \"\(command.name)\") options=\(shellQuoted(options.joined(separator: " ")))"
            let arguments = words(command.argumentCompletion)
            if !arguments.isEmpty { line += "; arguments=\(shellQuoted(arguments.joined(separator: " ")))" }
            lines.append(line + " ;;")
        }
        lines += [
            "        *) options= ;;",
            "    esac",
            #"    [ "$first" -eq 1 ] && options+=" --version""#,
            #"    if [[ $cur == -* ]]; then"#,
            #"        mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")"#,
            "    else",
            #"        mapfile -t COMPREPLY < <(compgen -W "$arguments" -- "$cur")"#,
            "    fi",
            "}",
            "complete -F _tokenrelay tokenrelay",
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// A zsh `_arguments` spec's description: `[`, `]` and `:` escaped.
    private static func zshDescription(_ text: String) -> String {
        text.replacing("\\", with: "\\\\").replacing("[", with: "\\[").replacing("]", with: "\\]")
            .replacing(":", with: "\\:")
    }

    private static func zshSpec(_ option: OptionSpec) -> String {
        let repeatable = option.help.contains("(repeatable)")
        var value = ""
        if let placeholder = option.value {
            let action: String
            switch option.completion {
            case .none: action = " "
            case .file: action = "_files"
            case .choices(let words): action = "(\(words.joined(separator: " ")))"
            }
            value = ":\(zshDescription(placeholder)):\(action)"
        }
        let description = "[\(zshDescription(option.help))]" + value
        if option.names.count == 1 {
            return shellQuoted((repeatable ? "*" : "") + option.names[0] + description)
        }
        let exclusion = repeatable ? "*" : "(\(option.names.joined(separator: " ")))"
        return shellQuoted(exclusion) + "{" + option.names.joined(separator: ",") + "}" + shellQuoted(description)
    }

    static var zsh: String {
        var lines = [
            "#compdef tokenrelay",
            "# zsh completion for tokenrelay (generated by `tokenrelay __completions zsh`)",
            "_tokenrelay() {",
            "    local -a commands",
            "    commands=(",
        ]
        for name in CommandTable.topLevelNames {
            let summary =
                CommandTable.command(name)?.summary
                ?? "the \(subcommands(of: name).joined(separator: " and ")) commands"
            lines.append("        \(shellQuoted(name + ":" + summary.replacing(":", with: "\\:")))")
        }
        lines += [
            "    )",
            #"    if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then"#,
            "        _describe command commands",
            "        return",
            "    fi",
            "    local command=serve",
            #"    if [[ $words[2] != -* ]]; then"#,
            "        command=$words[2]",
            "        shift words",
            "        (( CURRENT-- ))",
            "    fi",
        ]
        for parent in CommandTable.topLevelNames where !subcommands(of: parent).isEmpty {
            lines += [
                "    if [[ $command == \(parent) ]]; then",
                "        if (( CURRENT == 2 )); then",
                "            compadd -- \(subcommands(of: parent).joined(separator: " "))",
                "            return",
                "        fi",
                "        command=\"\(parent) $words[2]\"",
                "        shift words",
                "        (( CURRENT-- ))",
                "    fi",
            ]
        }
        lines.append("    case $command in")
        for command in CommandTable.commands {
            var specs = command.options.map(zshSpec) + [shellQuoted("(- *)--help[show this help]")]
            if command.name == "serve" { specs.append(shellQuoted("(- *)--version[print the version]")) }
            let arguments = words(command.argumentCompletion)
            if !arguments.isEmpty {
                specs.append(shellQuoted("*:argument:(\(arguments.joined(separator: " ")))"))
            } else if !command.arguments.isEmpty {
                specs.append(shellQuoted("*:argument: "))
            }
            lines.append("        \(shellQuoted(command.name)))")
            lines.append("            _arguments -s \\")
            lines += specs.dropLast().map { "                \($0) \\" }
            lines += specs.suffix(1).map { "                \($0)" }
            lines.append("            ;;")
        }
        lines += ["    esac", "}", #"_tokenrelay "$@""#]
        return lines.joined(separator: "\n") + "\n"
    }

    static var fish: String {
        var lines = [
            "# fish completion for tokenrelay (generated by `tokenrelay __completions fish`)",
            "function __tokenrelay_command",
            "    set -l words (commandline -opc)",
            "    set -l command serve",
            "    if test (count $words) -ge 2; and not string match -q -- '-*' $words[2]",
            "        set command $words[2]",
        ]
        for parent in CommandTable.topLevelNames where !subcommands(of: parent).isEmpty {
            lines += [
                "        if test $command = \(parent); and test (count $words) -ge 3",
                "            set command \"\(parent) $words[3]\"",
                "        end",
            ]
        }
        lines += [
            "    end",
            "    test \"$command\" = \"$argv[1]\"",
            "end",
            "function __tokenrelay_needs_command",
            "    test (count (commandline -opc)) -eq 1",
            "end",
            "complete -c tokenrelay -f",
        ]
        for name in CommandTable.topLevelNames {
            let summary =
                CommandTable.command(name)?.summary
                ?? "the \(subcommands(of: name).joined(separator: " and ")) commands"
            lines.append("complete -c tokenrelay -n __tokenrelay_needs_command -a \(name) -d \(quoted(summary))")
            for sub in subcommands(of: name) {
                let summary = CommandTable.command("\(name) \(sub)")?.summary ?? ""
                lines.append(
                    "complete -c tokenrelay -n '__tokenrelay_command \(name)' -a \(sub) -d \(quoted(summary))")
            }
        }
        for command in CommandTable.commands {
            let condition =
                command.name == "serve"
                ? "'__tokenrelay_command serve'" : quoted("__tokenrelay_command \(command.name)")
            for option in command.options {
                var line = "complete -c tokenrelay -n \(condition)"
                for name in option.names {
                    line += name.hasPrefix("--") ? " -l \(name.dropFirst(2))" : " -s \(name.dropFirst())"
                }
                if option.value != nil {
                    switch option.completion {
                    case .none: line += " -x"
                    case .file: line += " -r -F"
                    case .choices(let words): line += " -x -a \(quoted(words.joined(separator: " ")))"
                    }
                }
                lines.append(line + " -d \(quoted(option.help))")
            }
            let arguments = words(command.argumentCompletion)
            if !arguments.isEmpty {
                lines.append("complete -c tokenrelay -n \(condition) -a \(quoted(arguments.joined(separator: " ")))")
            }
            lines.append("complete -c tokenrelay -n \(condition) -s h -l help -d 'show this help'")
        }
        lines.append("complete -c tokenrelay -n __tokenrelay_needs_command -l version -d 'print the version'")
        return lines.joined(separator: "\n") + "\n"
    }
}
