#!/usr/bin/env python3
"""Checks that ARCHITECTURE.md names only things that exist, and the rules it states.

The map: every `code span` in the map that looks like a path (has a `/` or a file suffix) must
be a file or folder of the repository (or the end of one, e.g. `RelayRuntime.swift`), and every
one that looks like a Swift name (`TypeName`, `TypeName.member`, `TypeName.member(for:)`) must be
declared in Sources/ or Tests/: the type as a type, the member as a member. Names that belong to
the toolchain (Foundation, `TaskExecutor`, ...) are listed below.

The rules (ARCHITECTURE.md, "Rules the checker enforces"), over the Swift files of Sources/:
  credentials  only CredentialsMiddleware applies a resource credential to a request;
  threads      only TokenRelayPlatform starts threads or unstructured tasks;
  wire-errors  only ErrorMapping (and the MCP mapping) turns a foreign error into a wire error;
  auth-calls   only AuthorizationServerCall sends TokenRelayAuth's requests to an authorization
               server and turns the transport's errors into AuthErrors;
  file-size    no file over 500 lines without a stated reason;
  imports      a module imports only what Package.swift declares it depends on, and the module
               graph points one way, from the C shims up to the command line (LAYERS).
Each exception is listed below with its reason. Exits 1 with one line per breach (rule,
file:line, what to do), so neither the map nor the rules can quietly drift from the code.
    scripts/check-architecture.py [ARCHITECTURE.md]
    scripts/check-architecture.py --self-test   (each rule fails on a synthetic breach)
"""

import pathlib
import re
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Names the map uses that the toolchain or the protocol owns, not this repository.
EXTERNAL = {
    "Foundation",
    "FoundationEssentials",
    "FoundationNetworking",
    "Date.ISO8601FormatStyle",
    "TaskExecutor",
    "Result",
    "Params",
    "Mutex",
    "Atomic",
    "Task",
    "Task.detached",
    "Thread",
    "DispatchQueue",
    "DispatchSource",
    "Sendable",
    "CancellationError",
}
SWIFT_NAME = re.compile(r"^([A-Z][A-Za-z0-9]*)(?:\.([a-z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]*)(\(.*\))?)?$")
PATH_LIKE = re.compile(r"^[A-Za-z0-9_.+\-/]+$")
SUFFIXES = (".swift", ".md", ".py", ".json", ".yaml", ".h", ".lua", ".el", ".js", ".ts", ".sh")


def sources() -> list[str]:
    """The Swift files of Sources/ and Tests/, comments and string literals blanked."""
    texts = []
    for folder in ("Sources", "Tests"):
        for path in (ROOT / folder).rglob("*.swift"):
            texts.append(blank_strings(strip_comments(path.read_text(encoding="utf-8", errors="replace"))))
    return texts


def blank_strings(text: str) -> str:
    """`text` with the contents of its string literals ("...", multi-line \"\"\"...\"\"\") blanked, so
    that a brace in a string does not count as code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith('"""', i):
            end = text.find('"""', i + 3)
            end = n if end < 0 else end + 3
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            if j >= n or text[j] == "\n":  # unterminated on its line: blank to the line's end
                out.append(" " * (j - i))
                i = j
                continue
            out.append('"' + " " * (j - i - 1) + '"')
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def type_bodies(type_name: str, text: str) -> list[str]:
    """The parts of `text` directly inside the declarations and extensions of `type_name` (the
    members' own bodies and nested types' bodies left out: `struct Inner` and `func f(...)` are
    kept, what is between their braces is not)."""
    head = re.compile(
        rf"\b(?:class|struct|enum|actor|protocol|extension)\s+(?:[A-Za-z0-9_]+\.)*{re.escape(type_name)}\b[^{{;]*\{{"
    )
    bodies = []
    for match in head.finditer(text):
        depth, kept = 1, []
        for c in text[match.end() :]:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif depth == 1:
                kept.append(c)
        bodies.append("".join(kept))
    return bodies


def declared(type_name: str, member: str | None, code: list[str]) -> bool:
    """Whether `type_name` is declared (a module, a type, or a function), and `member`, when
    given, is declared in that type's own body or one of its extensions: a member of the same
    name in another type does not count."""
    if (ROOT / "Sources" / type_name).is_dir():  # a module
        return member is None
    kinds = r"(?:class|struct|enum|actor|protocol|typealias|extension)"
    if not any(
        re.search(rf"\b{kinds}\s+{re.escape(type_name)}\b", text)
        or re.search(rf"\bfunc\s+{re.escape(type_name)}\b", text)
        for text in code
    ):
        return False
    if member is None:
        return True
    name = re.escape(member)
    own = re.compile(
        rf"\b(?:func|var|let|init|class|struct|enum|actor|protocol|typealias)\s+{name}\b"
        rf"|\bcase\s+(?:[A-Za-z0-9_]+(?:\([^)]*\))?\s*,\s*)*{name}\b"
        rf"|\b(?:var|let)\s+\(?(?:[A-Za-z0-9_]+\s*,\s*)*{name}\b"
    )
    return any(own.search(body) for text in code for body in type_bodies(type_name, text))


def tracked_paths() -> list[str]:
    paths = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".git/", ".build/", ".venv/", ".interop/")) or "/node_modules/" in rel:
            continue
        paths.append(rel + ("/" if path.is_dir() else ""))
    return paths


def path_exists(name: str, paths: list[str]) -> bool:
    name = name.rstrip("/")
    return any(p.rstrip("/") == name or p.rstrip("/").endswith("/" + name) for p in paths)


# ---------------------------------------------------------------------------------------------
# The rules. Paths are relative to the repository; an exception names a file, how many sites it
# holds (a new site in a listed file fails as a new file would) and why it may.

RULES_DOC = "ARCHITECTURE.md, \"Rules the checker enforces\""

# credentials: a resource credential (the session's access token, a DPoP proof for it, a static
# API key, Basic or bearer secret) reaches a request only through `CredentialSource.apply(to:)`,
# and only the credentials middleware calls it (and `invalidate(stamp:)`, `signsAgain(after:)`),
# performing what `CredentialRecovery` decides. The files that declare `apply(to:)` (the
# credential sources) may write the headers; so may these, which authenticate tokenrelay itself
# to an authorization server or hand a token out, never a resource request:
CREDENTIAL_HEADER_EXCEPTIONS = {
    "Sources/TokenRelayAuth/TokenEndpointClient.swift": (
        2,
        "the client's own authentication at the token endpoint (client_secret_basic, RFC 6749 "
        "§2.3.1) and the DPoP proof of a token request (RFC 9449 §5): no access token is applied",
    ),
    "Sources/TokenRelayAuth/FormBody.swift": (
        1,
        "`FormBody.basicAuthorization`: the client_secret_basic value (RFC 6749 §2.3.1) that "
        "TokenEndpointClient sends to authenticate the client; no access token",
    ),
    "Sources/TokenRelayAuth/AssertionGrants.swift": (
        1,
        "the GitHub Actions runner's ACTIONS_ID_TOKEN_REQUEST_TOKEN, presented to the runner's own "
        "OIDC token service to obtain a client assertion; not a session's credential",
    ),
    "Sources/TokenRelayServer/CredentialHelper/TokenFormat.swift": (
        1,
        "`token --format header` prints the header line for the caller that asked for the token "
        "(expose_token); it is output, never put on a request",
    ),
}
CREDENTIAL_MIDDLEWARE = "Sources/TokenRelayAuth/CredentialsMiddleware.swift"
CREDENTIAL_CALL = re.compile(r"\.\s*(apply\(\s*to:|invalidate\(\s*stamp:|signsAgain\(\s*after:)")
CREDENTIAL_SOURCE = re.compile(r"\bfunc\s+apply\(\s*to\s+\w+\s*:\s*inout\s+HTTPRequest\b")
CREDENTIAL_HEADER = re.compile(
    r"(?:set|add|append|replace)\(\s*name:\s*\"(?:authorization|proxy-authorization|dpop)\"|"
    r"\"(?:authorization:\s*)?(?:bearer|dpop|basic) (?:\\\(|\"\s*\+)",
    re.IGNORECASE,
)

# threads: only TokenRelayPlatform starts a thread (Thread, pthread_create), a dispatch queue's
# work (DispatchQueue, DispatchSource) or an unstructured task (`Task {`, `Task(...)`,
# `Task.detached`), or names a task's executor (`executorPreference:` other than one Placement
# gives); elsewhere, `Placement.task`/`throwingTask`/`detached` with a place, `SerialThread`,
# `SystemThread` or a task group. The few exceptions are listed with their reasons.
THREAD_PLATFORM = "Sources/TokenRelayPlatform/"
THREAD_START = re.compile(
    r"\bTask\s*(?:<[^>{}]*>\s*)?[({]|\bTask\.detached\b|(?<!\w)Thread\s*[({]|\bThread\.detachNewThread\b|"
    r"\bpthread_create\b|\bDispatchQueue\b|\bDispatchSource\.make|\bexecutorPreference\s*:(?!\s*Placement\.)"
)
THREAD_EXCEPTIONS: dict[str, tuple[int, str]] = {
    "Sources/TokenRelayBench/RPCConnection.swift": (
        1, "the benchmark program's reader of the child's answers, a measuring harness and not the "
        "product: a blocking read on a thread of its own, as a load generator does",
    ),
    "Sources/TokenRelayJSONRPC/IO/StdioWriter.swift": (
        1, "the one-shot timer that lets a stopping server abandon a peer that stopped reading: it "
        "must fire while every task may be waiting on that peer",
    ),
    "Sources/tokenrelay/ProcessSetup.swift": (
        1, "the binary's signal sources (SIGTERM, SIGINT, SIGHUP): libdispatch delivers signals on a "
        "queue; the only way to take them over without a window where one is lost",
    ),
}

# wire-errors: an RPCError is made from a foreign error (its description, kind or type) only by
# ErrorMapping.rpcError; a JSON-RPC code is a literal only in ErrorCode and the MCP mapping;
# only ErrorMapping has a function from `any Error` to RPCError. Building one from a known kind
# and a message of its own is fine.
WIRE_ERROR_OWNERS = (
    "Sources/TokenRelayServer/ErrorMapping.swift",
    "Sources/TokenRelayServer/MCP/MCPProtocol.swift",
    "Sources/TokenRelayJSONRPC/ErrorCode.swift",
)
WIRE_ERROR_EXCEPTIONS: dict[str, tuple[int, str]] = {}
FOREIGN_ERROR = re.compile(
    r"(?:\\\(|\+)\s*(?:error|err|failure|underlying|cause)\b(?!\s*:)|String\(\s*describing:|"
    r"\blocalizedDescription\b|\berrorKind\b|\btype\(\s*of:"
)
RAW_CODE = re.compile(r"\bcode:\s*-32\d{3}\b|ErrorCode\(\s*rawValue:\s*-32\d{3}")
ERROR_TO_RPC = re.compile(r"\bfunc\s+\w+\s*(?:<[^>]*>)?\([^)]*:\s*(?:any\s+)?Error\b[^)]*\)[^{]*->\s*RPCError\b")

# auth-calls: every request TokenRelayAuth sends to an authorization server (token, discovery,
# device authorization, revocation, registration, metadata, JWKS) goes through
# AuthorizationServerCall.send, which alone catches the transport's HTTPError: so the same failure
# gives the same kind at every endpoint.
AUTH_CALL_OWNER = "Sources/TokenRelayAuth/AuthorizationServerCall.swift"
AUTH_CALL = re.compile(r"\.send\(\s*collecting:|\bas\s+HTTPError\b|catch\s+HTTPError\.")

# file-size: a Swift file of Sources/ over this many lines needs a reason here (and a ceiling:
# growing past it fails as a new one would).
FILE_LINES = 500
LONG_FILES: dict[str, tuple[int, str]] = {
    "Sources/TokenRelayAuth/SQLiteTokenStore.swift": (
        600, "the store's opening, records and seeds on its one SerialThread; files, leases, "
        "registrations and sealing are already extensions of their own",
    ),
    "Sources/TokenRelayConfig/Settings.swift": (
        600, "the settings types (declarations with their defaults, next to no logic): one per config "
        "section, each documented",
    ),
    "Sources/TokenRelayConfig/SettingsDecoder+Profiles.swift": (
        650, "the decoding of every profile type and its grant, client authentication and discovery "
        "members, which check each other",
    ),
    "Sources/TokenRelayJSONRPC/Dispatcher.swift": (
        650, "the in-flight table: input, execution with its bounds, batches, cancellation and "
        "lifecycle share one Mutex-guarded state",
    ),
}


def strip_comments(text: str) -> str:
    """`text` with // and /* */ comments blanked (line numbers kept); string literals kept."""
    out = []
    i, n = 0, len(text)
    in_string = in_block = False
    while i < n:
        c = text[i]
        if in_block:
            if text.startswith("*/", i):
                in_block = False
                i += 2
                continue
            out.append("\n" if c == "\n" else " ")
        elif in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"' or c == "\n":
                in_string = False
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            in_block = True
            i += 2
            continue
        else:
            if c == '"':
                in_string = True
            out.append(c)
        i += 1
    return "".join(out)


def call_arguments(text: str, start: int) -> str:
    """The text from `start` (just after an opening parenthesis) to its closing one."""
    depth, i = 1, start
    while depth and i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


class Breach:
    def __init__(self, rule: str, path: str, line: int, what: str, todo: str):
        self.rule, self.path, self.line, self.what, self.todo = rule, path, line, what, todo

    def __str__(self) -> str:
        self.what = " ".join(self.what.split())
        return f"rule {self.rule}: {self.path}:{self.line}: {self.what}; {self.todo} ({RULES_DOC})"


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def listed(
    rule: str, sites: dict[str, list[tuple[int, str]]], exceptions: dict[str, tuple[int, str]], todo: str
) -> list[Breach]:
    """Breaches of `rule` from `sites` (path -> [(line, what)]) beyond what `exceptions` allow."""
    breaches = []
    for path, found in sorted(sites.items()):
        allowed = exceptions.get(path, (0, ""))[0]
        if len(found) > allowed:
            extra = f" (the list allows {allowed} here)" if allowed else ""
            for line, what in found:
                breaches.append(Breach(rule, path, line, what + extra, todo))
    for path, (count, _) in sorted(exceptions.items()):
        have = len(sites.get(path, []))
        if have < count:
            breaches.append(
                Breach(
                    rule, path, 1, f"listed as an exception with {count} site(s) but has {have}",
                    "lower or remove its entry in scripts/check-architecture.py",
                )
            )
    return breaches


def check_rules(
    root: pathlib.Path,
    credential_exceptions: dict[str, tuple[int, str]],
    thread_exceptions: dict[str, tuple[int, str]],
    wire_exceptions: dict[str, tuple[int, str]],
    long_files: dict[str, tuple[int, str]],
) -> list[Breach]:
    files = {}
    for path in sorted((root / "Sources").rglob("*.swift")):
        files[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8", errors="replace")
    breaches: list[Breach] = []

    # credentials
    calls, headers = {}, {}
    for path, raw in files.items():
        code = strip_comments(raw)
        if path != CREDENTIAL_MIDDLEWARE:
            for m in CREDENTIAL_CALL.finditer(code):
                calls.setdefault(path, []).append(
                    (line_of(code, m.start()), f"calls CredentialSource.{m.group(1).split('(')[0]}")
                )
        if path == CREDENTIAL_MIDDLEWARE or CREDENTIAL_SOURCE.search(code):
            continue
        lines = set()
        for m in CREDENTIAL_HEADER.finditer(code):
            line = line_of(code, m.start())
            if line not in lines:  # one site per line
                lines.add(line)
                headers.setdefault(path, []).append((line, f"writes a credential: {m.group(0)}"))
    breaches += listed(
        "credentials", calls, {},
        "send the request through the environment's middleware stack (CredentialsMiddleware performs "
        "CredentialRecovery's decision) instead of applying or invalidating a credential here",
    )
    breaches += listed(
        "credentials", headers, credential_exceptions,
        "let a CredentialSource attach it (reached only through CredentialsMiddleware), or, if it "
        "authenticates tokenrelay itself rather than a resource request, list the file with its reason",
    )

    # threads
    starts = {}
    for path, raw in files.items():
        if path.startswith(THREAD_PLATFORM):
            continue
        code = strip_comments(raw)
        for m in THREAD_START.finditer(code):
            starts.setdefault(path, []).append((line_of(code, m.start()), f"starts `{m.group(0).strip()}`"))
    breaches += listed(
        "threads", starts, thread_exceptions,
        "start it through TokenRelayPlatform (Placement.task, SerialThread, SystemThread) or a task "
        "group, or list the file with its reason",
    )

    # wire-errors
    wire = {}
    for path, raw in files.items():
        if path in WIRE_ERROR_OWNERS:
            continue
        code = strip_comments(raw)
        for m in re.finditer(r"\bRPCError\s*\(", code):
            arguments = call_arguments(code, m.end())
            foreign = FOREIGN_ERROR.search(arguments)
            if foreign:
                wire.setdefault(path, []).append(
                    (line_of(code, m.start()), f"builds an RPCError from an error (`{foreign.group(0).strip()}`)")
                )
        for m in RAW_CODE.finditer(code):
            wire.setdefault(path, []).append((line_of(code, m.start()), f"a literal wire code `{m.group(0)}`"))
        for m in ERROR_TO_RPC.finditer(code):
            wire.setdefault(path, []).append((line_of(code, m.start()), "a function from an error to an RPCError"))
    breaches += listed(
        "wire-errors", wire, wire_exceptions,
        "throw or map the error with ErrorMapping.rpcError (then MCPProtocol.mapError on the MCP "
        "faces), or build the RPCError from a known kind and a message of your own",
    )

    # auth-calls
    sends = {}
    for path, raw in files.items():
        if not path.startswith("Sources/TokenRelayAuth/") or path == AUTH_CALL_OWNER:
            continue
        code = strip_comments(raw)
        for m in AUTH_CALL.finditer(code):
            sends.setdefault(path, []).append((line_of(code, m.start()), f"`{m.group(0).strip()}`"))
    breaches += listed(
        "auth-calls", sends, {},
        "send through AuthorizationServerCall.send (it wraps the transport's failures as AuthError.endpoint "
        "and maps cancellation), and classify the answer with AuthorizationServerCall.isTransient/refusal",
    )

    # file-size
    for path, raw in files.items():
        lines = raw.count("\n") + (0 if raw.endswith("\n") or not raw else 1)
        ceiling, _ = long_files.get(path, (FILE_LINES, ""))
        if lines > ceiling:
            what = f"{lines} lines" + (f", past its stated ceiling of {ceiling}" if path in long_files else "")
            breaches.append(
                Breach(
                    "file-size", path, lines, what,
                    f"split it by responsibility (an extension per concern) below {FILE_LINES} lines, or "
                    "list it with its reason",
                )
            )
    for path in sorted(long_files):
        if path not in files:
            breaches.append(
                Breach("file-size", path, 1, "listed as a long file but missing", "remove its entry")
            )
        elif files[path].count("\n") <= FILE_LINES:
            breaches.append(
                Breach(
                    "file-size", path, 1, f"listed as a long file but has at most {FILE_LINES} lines",
                    "remove its entry",
                )
            )
    return breaches


# imports: the modules' graph is Package.swift's (a module imports only what it declares, never
# a dependency's dependency), and it points one way: a module depends only on modules of earlier
# layers (ARCHITECTURE.md, "Modules"). The developer targets (fuzzers, benchmarks) are not layered.
LAYERS = [
    {"CCurl", "CSQLite", "CCrypto", "CPostgres", "CSecret", "CYAML", "CSystem"},
    {"TokenRelayPlatform", "TokenRelayErrorKinds", "TokenRelayHTTPFields"},
    {"TokenRelayLogging"},
    {"TokenRelayJSONRPC", "TokenRelayConfig", "TokenRelayHTTP"},
    {"TokenRelayAuth"},
    {"TokenRelayServer"},
    {"TokenRelayCommands", "TokenRelay"},
    {"tokenrelay"},
]
# A module's tests test that module: a test target depends on no module above it (HTTPTests does
# not reach into Auth; what tests share lives in TestSupport, which stays below Auth).
TEST_TARGETS = {
    "PlatformTests": "TokenRelayPlatform",
    "LoggingTests": "TokenRelayLogging",
    "JSONRPCTests": "TokenRelayJSONRPC",
    "ConfigTests": "TokenRelayConfig",
    "HTTPTests": "TokenRelayHTTP",
    "TestSupport": "TokenRelayHTTP",
    "AuthTests": "TokenRelayAuth",
    "RelayTests": "TokenRelayServer",
    "CommandsTests": "TokenRelayCommands",
    "TokenRelayTests": "TokenRelay",
}
TARGET_DECLARATION = re.compile(
    r'\.(?:target|executableTarget|testTarget)\(\s*name:\s*"(\w+)"(?:\s*,\s*dependencies:\s*\[([^\]]*)\])?', re.S
)
IMPORT = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*import\s+(TokenRelay\w*|C[A-Z]\w*)\b", re.M)


def check_imports(root: pathlib.Path) -> list[Breach]:
    package = (root / "Package.swift").read_text(encoding="utf-8")
    declared_deps = {
        name: set(re.findall(r'"(\w+)"', deps or "")) for name, deps in TARGET_DECLARATION.findall(package)
    }
    layer = {module: index for index, modules in enumerate(LAYERS) for module in modules}
    breaches: list[Breach] = []
    for target, module in sorted(TEST_TARGETS.items()):
        for dep in sorted(declared_deps.get(target, set())):
            if dep in layer and layer[dep] > layer[module]:
                breaches.append(
                    Breach(
                        "imports", "Package.swift", 1, f"{target} (the tests of {module}) depends on {dep}, above it",
                        "move the test to the tests of the module it tests (shared helpers go to TestSupport)",
                    )
                )
    for module, deps in sorted(declared_deps.items()):
        if module not in layer:
            continue
        for dep in sorted(deps):
            if dep in layer and layer[dep] >= layer[module]:
                breaches.append(
                    Breach(
                        "imports", "Package.swift", 1, f"{module} depends on {dep}, which is not below it",
                        "invert the dependency (move the shared part down), or change LAYERS and "
                        "ARCHITECTURE.md's module map together",
                    )
                )
        for path in sorted((root / "Sources" / module).rglob("*.swift")):
            code = strip_comments(path.read_text(encoding="utf-8", errors="replace"))
            for m in IMPORT.finditer(code):
                if m.group(1) != module and m.group(1) not in deps:
                    breaches.append(
                        Breach(
                            "imports", path.relative_to(root).as_posix(), line_of(code, m.start()),
                            f"imports {m.group(1)}, which {module} does not declare in Package.swift",
                            "declare the dependency (if the layers allow it) or do without the import",
                        )
                    )
    return breaches


def check_repository() -> list[Breach]:
    return check_rules(
        ROOT, CREDENTIAL_HEADER_EXCEPTIONS, THREAD_EXCEPTIONS, WIRE_ERROR_EXCEPTIONS, LONG_FILES
    ) + check_imports(ROOT)


SELF_TEST_BASE = {
    # What each rule allows: the middleware applies; a source writes the header; the platform
    # starts threads; a known kind with a message of its own; mentions in comments.
    CREDENTIAL_MIDDLEWARE: """
        let stamp = try await source.apply(to: &request)
        try await source.invalidate(stamp: stamp)
    """,
    "Sources/TokenRelayAuth/SomeCredentialSource.swift": """
        public func apply(to request: inout HTTPRequest) async throws -> CredentialStamp {
            request.headers.set(name: "Authorization", value: "Bearer \\(token.accessToken)")
        }
    """,
    "Sources/TokenRelayPlatform/Threads.swift": """
        Task.detached { await body() }
        pthread_create(&thread, nil, start, box)
    """,
    "Sources/TokenRelayServer/Fine.swift": """
        // Task { } and credentials.apply(to: &request) in a comment do not count.
        Placement.task { await work() }
        Placement.detached(.pool) { await work() }
        await withTaskGroup(of: Void.self) { group in group.addTask { await work() } }
        group.addTask(executorPreference: Placement.ownTasks) { await work() }
        if Task.isCancelled { try await Task.sleep(for: .seconds(1)) }
        var pending: Task<Void, Never>?
        let thread = SerialThread(named: "x")
        throw RPCError(kind: .timeout, message: "no answer from \\(name)")
        throw ErrorMapping.rpcError(error)
        let value = response.headers["Authorization"]
        let answer = try await client.send(collecting: request)
    """,
    AUTH_CALL_OWNER: """
        do {
            return try await transport.send(collecting: request)
        } catch let error as HTTPError {
            throw AuthError.endpoint(endpoint, error)
        }
    """,
    "Sources/TokenRelayServer/ErrorMapping.swift": """
        public static func rpcError(_ error: any Error) -> RPCError {
            RPCError(kind: .internal, message: String(describing: error))
        }
    """,
}
SELF_TEST_BREACHES = {
    "credentials": [
        "_ = try await credentials.apply(to: &request)",
        "try await credentials.invalidate(stamp: stamp)",
        "if credentials.signsAgain(after: status, headers: headers, request: request) {}",
        'request.headers.set(name: "Authorization", value: "Bearer \\(token.accessToken)")',
        'headers.add(name: "DPoP", value: proof)',
        'request.headers.set(name: credentialHeader, value: "Bearer " + token.accessToken)',
    ],
    "threads": [
        "Task { await work() }",
        "let task = Task(executorPreference: nil) { await work() }",
        "let task = Task<Void, Never> { await work() }",
        "Task.detached { await work() }",
        "let reader = Thread { read() }",
        "Foundation.Thread.detachNewThread { read() }",
        "DispatchQueue.global().async { work() }",
        "pthread_create(&thread, nil, start, nil)",
        "group.addTask(executorPreference: loop) { await work() }",
    ],
    "wire-errors": [
        'throw RPCError(code: .internal, message: "it failed: \\(error)")',
        "throw RPCError(\n    kind: .internal,\n    message: String(describing: error))",
        "return RPCError(kind: error.errorKind, message: text)",
        'output(errorAnswer(id: id, code: -32603, message: "could not deliver"))',
        "static func wire(_ error: any Error) -> RPCError { .cancelled }",
    ],
    "auth-calls": [
        ("Sources/TokenRelayAuth/NextEndpoint.swift", "let response = try await transport.send(collecting: request)"),
        ("Sources/TokenRelayAuth/NextEndpoint.swift", "} catch let error as HTTPError { throw .transport(\"x\") }"),
    ],
    "file-size": ["let x = 1\n" * (FILE_LINES + 1)],
}


def self_test() -> int:
    """Runs the rules on synthetic trees: the base passes; each breach fails its rule (and only
    it); the exception lists allow what they list, fail on one site more and on a stale entry."""
    failures = []

    def run(files: dict[str, str], threads: dict[str, tuple[int, str]] | None = None) -> list[Breach]:
        root = pathlib.Path(tempfile.mkdtemp(prefix="check-architecture-"))
        try:
            for path, text in files.items():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text, encoding="utf-8")
            return check_rules(root, {}, threads or {}, {}, {})
        finally:
            shutil.rmtree(root)

    def expect(name: str, breaches: list[Breach], rule: str | None) -> None:
        rules = {b.rule for b in breaches}
        if rule is None and breaches:
            failures.append(f"{name}: expected no breach, got: " + "; ".join(map(str, breaches)))
        elif rule is not None and rules != {rule}:
            failures.append(f"{name}: expected a breach of rule {rule}, got {sorted(rules) or 'none'}")

    expect("the base tree", run(SELF_TEST_BASE), None)
    breach_path = "Sources/TokenRelayServer/NextFrontDoor.swift"
    for rule, snippets in SELF_TEST_BREACHES.items():
        for entry in snippets:
            path, snippet = entry if isinstance(entry, tuple) else (breach_path, entry)
            expect(f"{rule}: {snippet.splitlines()[0][:60]}", run({**SELF_TEST_BASE, path: snippet}), rule)
    two = "Task { await a() }\nTask { await b() }\n"
    expect("a listed exception", run({**SELF_TEST_BASE, breach_path: two}, {breach_path: (2, "why")}), None)
    expect("one site past a listed exception", run({**SELF_TEST_BASE, breach_path: two}, {breach_path: (1, "why")}), "threads")
    expect("a stale exception", run(SELF_TEST_BASE, {breach_path: (1, "why")}), "threads")
    import_cases = self_test_imports(failures)
    map_cases = self_test_map(failures)
    for line in failures:
        print(line)
    cases = sum(len(s) for s in SELF_TEST_BREACHES.values()) + 4 + map_cases + import_cases
    print(f"architecture rules self-test: {cases - len(failures)} of {cases} cases hold")
    return 1 if failures else 0


SELF_TEST_PACKAGE = """
    .target(name: "TokenRelayPlatform", dependencies: ["CSystem"]),
    .target(name: "TokenRelayHTTP", dependencies: ["TokenRelayPlatform"]),
    .target(
        name: "TokenRelayAuth",
        dependencies: ["TokenRelayHTTP"]),
    .executableTarget(name: "FuzzJOSE", dependencies: ["TokenRelayAuth", "TokenRelayServer"]),
"""
SELF_TEST_IMPORTS = [
    # (Package.swift, {file: text}, breach?)
    (SELF_TEST_PACKAGE, {"Sources/TokenRelayAuth/A.swift": "import TokenRelayHTTP\n@_spi(X) import TokenRelayAuth\n"}, False),
    (SELF_TEST_PACKAGE, {"Sources/TokenRelayAuth/A.swift": "// import TokenRelayServer\nimport Synchronization\n"}, False),
    (SELF_TEST_PACKAGE, {"Sources/TokenRelayAuth/A.swift": "import TokenRelayPlatform\n"}, True),
    (SELF_TEST_PACKAGE, {"Sources/TokenRelayHTTP/A.swift": "@testable import TokenRelayAuth\n"}, True),
    (SELF_TEST_PACKAGE.replace('["TokenRelayPlatform"]', '["TokenRelayPlatform", "TokenRelayAuth"]'), {}, True),
    (SELF_TEST_PACKAGE + '.testTarget(name: "HTTPTests", dependencies: ["TokenRelayHTTP"]),', {}, False),
    (SELF_TEST_PACKAGE + '.testTarget(name: "HTTPTests", dependencies: ["TokenRelayHTTP", "TokenRelayAuth"]),', {}, True),
]


def self_test_imports(failures: list[str]) -> int:
    """The imports rule on synthetic packages: declared imports pass; an undeclared one (even a
    dependency's dependency) and an upward dependency fail."""
    for index, (package, files, breach) in enumerate(SELF_TEST_IMPORTS):
        root = pathlib.Path(tempfile.mkdtemp(prefix="check-architecture-"))
        try:
            (root / "Package.swift").write_text(package, encoding="utf-8")
            for path, text in files.items():
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text, encoding="utf-8")
            found = check_imports(root)
        finally:
            shutil.rmtree(root)
        if bool(found) != breach:
            failures.append(f"imports case {index}: expected {'a breach' if breach else 'none'}, got {found}")
    return len(SELF_TEST_IMPORTS)


SELF_TEST_MAP_CODE = [
    """
    struct Runtime {
        let label = "} a brace in a string is not code {"
        func swap() { if true { let inner = 1 } }
        enum Kind { case nested, other }
    }
    extension Runtime { static func reload() {} }
    """,
    """
    final class Mapping {
        static let text = \"\"\"
            { "json": "{" }
            \"\"\"
        func wire(_ error: any Error) -> Int { func helper() {}; return 0 }
        var count = 0
    }
    enum Side { case left(Int), right }
    """,
]
SELF_TEST_MAP = [
    # (type, member, declared?): a member counts only in its own type's body or extensions.
    ("Runtime", None, True),
    ("Runtime", "swap", True),
    ("Runtime", "reload", True),
    ("Runtime", "Kind", True),
    ("Mapping", "wire", True),
    ("Mapping", "count", True),
    ("Side", "right", True),
    ("Runtime", "wire", False),
    ("Mapping", "swap", False),
    ("Runtime", "nested", False),
    ("Mapping", "helper", False),
    ("Runtime", "inner", False),
    ("Missing", None, False),
]


def self_test_map(failures: list[str]) -> int:
    """The map's names: `Type.member` holds only when the member is declared in that type."""
    code = [blank_strings(strip_comments(text)) for text in SELF_TEST_MAP_CODE]
    for type_name, member, expected in SELF_TEST_MAP:
        if declared(type_name, member, code) != expected:
            name = type_name + ("." + member if member else "")
            failures.append(f"map: `{name}` should be {'declared' if expected else 'refused'}")
    return len(SELF_TEST_MAP)


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    doc = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "ARCHITECTURE.md"
    text = doc.read_text(encoding="utf-8")
    code = sources()
    paths = tracked_paths()
    missing = []
    for span in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        if span in EXTERNAL:
            continue
        if ("/" in span or span.endswith(SUFFIXES)) and PATH_LIKE.match(span) and not span.startswith("$/"):
            if not path_exists(span, paths):
                missing.append(f"{doc.name}: no file or folder `{span}`")
            continue
        match = SWIFT_NAME.match(span)
        if match and re.search(r"[a-z]", span):
            type_name, member, _ = match.groups()
            if not declared(type_name, member, code):
                missing.append(f"{doc.name}: `{span}` is declared nowhere in Sources/ or Tests/")
    for line in missing:
        print(line)
    print(f"architecture map: {len(missing)} missing name(s)")
    breaches = check_repository()
    for breach in breaches:
        print(breach)
    print(f"architecture rules: {len(breaches)} breach(es)")
    return 1 if missing or breaches else 0


if __name__ == "__main__":
    sys.exit(main())
