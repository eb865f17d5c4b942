/// One option a command takes, as the parser, `--help`, the man page and the completions know it.
struct OptionSpec: Sendable {
    /// Every spelling, the short one first (`-H`, `--header`); the last is the one help shows as long.
    let names: [String]
    /// The value's placeholder (`PATH`), or `nil` for a flag.
    let value: String?
    /// What a completion offers for the value.
    let completion: ValueCompletion
    /// One line for `--help` and the man page.
    let help: String

    init(_ names: [String], value: String? = nil, completion: ValueCompletion = .none, _ help: String) {
        self.names = names
        self.value = value
        self.completion = completion
        self.help = help
    }

    /// The spellings and the placeholder as help prints them: `-H, --header 'NAME: VALUE'`.
    var synopsis: String {
        names.joined(separator: ", ") + (value.map { " \($0)" } ?? "")
    }
}

/// What a shell completion offers for an option's value or a positional argument.
enum ValueCompletion: Sendable, Equatable {
    /// Nothing in particular (free text).
    case none
    /// A file path.
    case file
    /// One of these words.
    case choices([String])
}

/// One command: its name (`store rekey` for a subcommand), the arguments after its options, and the
/// options it takes. ``ArgumentParser`` refuses any option not listed here, so `--help`, the man page
/// and the completions (all generated from this table) name every option a command accepts.
struct CommandSpec: Sendable {
    /// The words that name it (`call`; `store rekey`).
    let name: String
    /// The positional arguments, as usage shows them (`METHOD PATH`).
    let arguments: String
    /// One line: what it does.
    let summary: String
    /// A paragraph or two for `COMMAND --help` and the man page.
    let details: String
    /// What a completion offers for the positional arguments.
    let argumentCompletion: ValueCompletion
    let options: [OptionSpec]

    init(
        _ name: String, arguments: String = "", summary: String, details: String = "",
        argumentCompletion: ValueCompletion = .none, options: [OptionSpec]
    ) {
        self.name = name
        self.arguments = arguments
        self.summary = summary
        self.details = details
        self.argumentCompletion = argumentCompletion
        self.options = options
    }

    /// The option spelled `name`, if this command takes it.
    func option(named name: String) -> OptionSpec? {
        options.first { $0.names.contains(name) }
    }
}

/// The table of commands and options: the one source of the parser's accepted options, `--help`,
/// `tokenrelay.1` (`tokenrelay __man`) and the bash, zsh and fish completions
/// (`tokenrelay __completions SHELL`).
enum CommandTable {
    static let config = OptionSpec(
        ["--config"], value: "PATH", completion: .file,
        "the config file (default: $TOKENRELAY_CONFIG, else ~/.config/tokenrelay/config.yaml)")
    static let environment = OptionSpec(
        ["--env"], value: "NAME", "the environment (default: the config's default_environment)")
    static let profile = OptionSpec(["--profile"], value: "NAME", "the profile (default: the environment's default)")
    static let logLevel = OptionSpec(
        ["--log-level"], value: "LEVEL", completion: .choices(["error", "warn", "info", "debug", "trace"]),
        "what to log on stderr (default: warn)")
    static let header = OptionSpec(["-H", "--header"], value: "'NAME: VALUE'", "add a header (repeatable)")
    static let noAuth = OptionSpec(["--no-auth"], "send no credentials")

    /// `--config`, `--env`, `--profile`, `--log-level`: what ``CommandOptions`` takes.
    static let oneShotOptions = [config, environment, profile, logLevel]

    /// Every command, in the order help lists them.
    static let commands: [CommandSpec] = [
        CommandSpec(
            "serve", summary: "serve JSON-RPC 2.0 on stdin/stdout (the default command)",
            details: """
                Newline-delimited JSON or Content-Length framing, detected from the first bytes. \
                Logs go to stderr. SIGHUP reloads the configuration; SIGINT and SIGTERM drain and stop.
                """,
            options: [
                config, environment,
                OptionSpec(
                    ["--framing"], value: "MODE", completion: .choices(["auto", "ndjson", "lsp"]),
                    "the framing: auto (default), ndjson or lsp (Content-Length)"),
                OptionSpec(
                    ["--log-level"], value: "LEVEL", completion: .choices(["error", "warn", "info", "debug", "trace"]),
                    "what to log on stderr (default: info)"),
                OptionSpec(
                    ["--log-format"], value: "FORMAT", completion: .choices(["text", "json"]),
                    "the log line format (default: text)"),
            ]),
        CommandSpec(
            "mcp", summary: "serve the configured APIs as MCP tools to an agent on stdin/stdout",
            details: """
                An MCP server (stdio transport): the tools http_request and list_environments, under                 the mcp: rules of the config; the agent never receives a credential. See docs/agents.md.
                """,
            options: [
                config, environment,
                OptionSpec(
                    ["--log-level"], value: "LEVEL", completion: .choices(["error", "warn", "info", "debug", "trace"]),
                    "what to log on stderr (default: info)"),
                OptionSpec(
                    ["--log-format"], value: "FORMAT", completion: .choices(["text", "json"]),
                    "the log line format (default: text)"),
            ]),
        CommandSpec(
            "mcp-proxy", summary: "relay stdio MCP to a remote OAuth-protected MCP server (Streamable HTTP)",
            details: """
                Takes the server's URL (no config needed: discovery, registration and login are \
                automatic) or --env NAME [--profile P]. The login URL goes to stderr.
                """,
            options: oneShotOptions + [
                OptionSpec(["--browser"], "open the login page in a browser (default: print the URL only)")
            ]),
        CommandSpec(
            "exec", arguments: "-- CMD [ARGS...]",
            summary: "run a program with a private endpoint that adds the session's credentials",
            details: """
                Serves http://127.0.0.1:PORT/ENV/... (or --listen unix:PATH, mode 0600) while CMD runs: \
                a request presenting the placeholder TOKENRELAY_TOKEN goes to ENV's base_url with the \
                profile's credentials; the child never holds one. The child gets TOKENRELAY_URL, \
                TOKENRELAY_TOKEN and the environment's exec.env variables, without the variables the \
                config's secrets are read from. Exit status: the child's (128+signal when killed). \
                See docs/exec.md.
                """,
            options: oneShotOptions + [
                OptionSpec(["--listen"], value: "unix:PATH", "listen on a Unix socket instead of 127.0.0.1")
            ]),
        CommandSpec(
            "check-config", summary: "validate the config file and print every problem",
            details: """
                Prints file:line:column diagnostics on stderr. Exit status: 0 valid (warnings \
                allowed), 1 invalid, 2 usage error.
                """,
            options: [
                config,
                OptionSpec(["--json"], "print the diagnostics as a JSON array on stdout"),
                OptionSpec(
                    ["--resolve-secrets"],
                    "also require every variable and resolve every secret (runs secret commands; never prints values)"),
            ]),
        CommandSpec(
            "call", arguments: "METHOD PATH", summary: "make one authenticated request and print the response body",
            details: """
                PATH is relative to the environment's base_url, or an absolute URL (credentials go only \
                to the environment's origin and its allowed_origins). Exit status: 0 for 2xx, 4 for \
                4xx, 5 for 5xx, 6 for another status; see EXIT STATUS.
                """,
            options: oneShotOptions + [
                header,
                OptionSpec(["--query"], value: "NAME=VALUE", "add a query parameter (repeatable)"),
                OptionSpec(["--json"], value: "BODY", "send BODY as a JSON body"),
                OptionSpec(["--data"], value: "TEXT", "send TEXT as the body"),
                OptionSpec(["--timeout"], value: "SECONDS", "the request's deadline, e.g. 5 or 2.5s"),
                noAuth,
                OptionSpec(
                    ["-v", "--verbose"],
                    "print the status line and headers on stderr, and why credentials were or were not attached"),
            ]),
        CommandSpec(
            "subscribe", arguments: "PATH", summary: "follow a server-sent event stream; one JSON line per event",
            details: """
                Prints {"id"?, "event", "data", "retry"?} per event on stdout. A dropped stream is \
                reconnected (with Last-Event-ID) until a signal stops the command, or, with \
                --until-closed, until the server ends the stream cleanly (exit 0).
                """,
            options: oneShotOptions + [
                OptionSpec(["--last-event-id"], value: "ID", "resume after this event id"),
                OptionSpec(
                    ["--until-closed"],
                    "end when the server ends the stream cleanly instead of reconnecting (drops still reconnect)"),
                header, noAuth,
                OptionSpec(["-v", "--verbose"], "log connections and reconnects on stderr (--log-level info)"),
            ]),
        CommandSpec(
            "token", arguments: "[get|store|erase]", summary: "print a profile's access token (credential-helper mode)",
            details: """
                The profile must set expose_token: true. --format git speaks git's credential-helper \
                protocol on stdin/stdout and takes one action: get, store or erase.
                """,
            argumentCompletion: .choices(["get", "store", "erase"]),
            options: oneShotOptions + [
                OptionSpec(
                    ["--format"], value: "FORMAT",
                    completion: .choices(["raw", "header", "json", "exec-credential", "git"]),
                    "raw (default), header, json, exec-credential (kubectl) or git"),
                OptionSpec(["--min-valid"], value: "DURATION", "renew first unless valid this long, e.g. 60s or 5m"),
            ]),
        CommandSpec(
            "login", summary: "log in interactively (authorization code with PKCE, or device code)",
            details: "What to open goes to stderr; exit 0 once the session is stored.",
            options: oneShotOptions + [
                OptionSpec(["--no-browser"], "print the URL instead of opening a browser"),
                OptionSpec(
                    ["--paste"],
                    "also accept, on stdin, the URL the browser was redirected to (the browser is on another machine)"),
            ]),
        CommandSpec(
            "status", summary: "show the store and every session's state",
            details: """
                With --watch, then one line per change of a session (in this process or another \
                sharing the store: valid, login-required, logged-in, logged-out, invalidated, \
                refresh-failed, expired) until SIGINT; with --json, each as a JSON line.
                """,
            options: [
                config, environment, OptionSpec(["--json"], "print the status as JSON"),
                OptionSpec(["--watch"], "then print each session change as it happens, until SIGINT"),
            ]),
        CommandSpec(
            "logout", summary: "forget a session (and revoke its tokens at the server when it can)",
            options: [
                config, environment, profile, OptionSpec(["--all"], "every session of the config"),
                OptionSpec(
                    ["--forget-key"],
                    "with --all: then remove the store's key from the secret service (the store must hold no session)"),
            ]),
        CommandSpec(
            "invalidate", summary: "expire a session's access token so every process renews it (token-invalidate)",
            details: "Refresh state is kept; use it after a token was revoked.",
            options: [config, environment, profile, OptionSpec(["--all"], "every session of the config")]),
        CommandSpec(
            "store new-key", summary: "print a new random store encryption key",
            options: []),
        CommandSpec(
            "store rekey", summary: "seal every record of the store under a new key",
            details:
                "Give the new key one way; then set store.encryption_key to it (--new-key-keyring: a new key kept by the secret service).",
            options: [
                config,
                OptionSpec(["--new-key-env"], value: "NAME", "the new key is in this environment variable"),
                OptionSpec(["--new-key-file"], value: "PATH", completion: .file, "the new key is in this file"),
                OptionSpec(["--new-key-keyring"], "a new random key, kept by the desktop's secret service"),
            ]),
    ]

    /// The command named `name` (`store rekey` for a subcommand).
    static func command(_ name: String) -> CommandSpec? {
        commands.first { $0.name == name }
    }

    /// The first words of every command (`store` once), in table order.
    static var topLevelNames: [String] {
        var names: [String] = []
        for command in commands {
            let first = String(command.name.split(separator: " ")[0])
            if !names.contains(first) { names.append(first) }
        }
        return names
    }
}
