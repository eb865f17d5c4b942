"""`tokenrelay mcp-proxy` against the official MCP Python SDK's OAuth-protected server, driven
by the SDK's own MCP client over stdio (SPEC §9, issue 38)."""

from __future__ import annotations

import base64
import functools
import json
import os
import sqlite3
import stat
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parent))
from dpop_mcp_server import DPoPMCPServer  # noqa: E402
from oauth_mcp_server import OAuthMCPServer, Options, Recorded  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# Plays the person: opens the authorization URL (the SDK's authorize endpoint approves at once and
# redirects to the loopback listener), follows that one redirect, and notes the login.
BROWSER = textwrap.dedent(
    """\
    #!PYTHON
    import sys, urllib.request, urllib.error
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(sys.argv[1], timeout=30)
        sys.exit("no redirect from the authorization endpoint")
    except urllib.error.HTTPError as error:
        location = error.headers["Location"]
    with open("LOG", "a") as log:
        log.write(sys.argv[1] + "\\n")
    urllib.request.urlopen(location, timeout=30).read()
    """
)


def binary() -> str:
    path = os.environ.get("TOKENRELAY_BIN") or str(
        ROOT / ".build" / "debug" / "tokenrelay"
    )
    if not os.path.exists(path):
        pytest.fail(
            f"no tokenrelay binary at {path} (swift build first, or set TOKENRELAY_BIN)"
        )
    return path


class Host:
    """One user's machine: a state directory (the default store) and a browser."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state = directory / "state"
        self.state.mkdir(mode=0o700)
        bin_dir = directory / "bin"
        bin_dir.mkdir()
        self.browser_log = directory / "browser.log"
        script = bin_dir / "xdg-open"
        script.write_text(
            BROWSER.replace("PYTHON", sys.executable).replace(
                "LOG", str(self.browser_log)
            )
        )
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.env = {
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "XDG_STATE_HOME": str(self.state),
            "HOME": str(directory),
        }
        self.stderr_paths: list[Path] = []

    def logins(self) -> list[str]:
        return (
            self.browser_log.read_text().splitlines()
            if self.browser_log.exists()
            else []
        )

    def params(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=binary(), args=["mcp-proxy", *args], env=self.env
        )

    def errlog(self):
        path = self.directory / f"stderr-{len(self.stderr_paths)}.log"
        self.stderr_paths.append(path)
        return open(path, "w")

    def stderr(self) -> str:
        return "".join(p.read_text() for p in self.stderr_paths if p.exists())

    def registration_count(self) -> int:
        database = self.state / "tokenrelay" / "sessions.db"
        with sqlite3.connect(database) as connection:
            return int(
                connection.execute("SELECT count(*) FROM registrations").fetchone()[0]
            )


@pytest.fixture
def host() -> Iterator[Host]:
    with tempfile.TemporaryDirectory(prefix="tokenrelay-mcp-") as directory:
        yield Host(Path(directory))


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[OAuthMCPServer]:
    options = getattr(request, "param", None) or Options()
    running = OAuthMCPServer(options=options).start()
    yield running
    running.stop()


async def call_echo(
    host: Host, url: str, text: str, *extra: str, tool: str = "echo"
) -> tuple[object, object]:
    """Starts one proxy, initializes, calls a tool; returns the tool result and the init result."""
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(host.errlog())
        read, write = await stack.enter_async_context(
            stdio_client(host.params(url, *extra), errlog=errlog)
        )
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(120):
            init = await session.initialize()
            arguments = {"text": text} if tool == "echo" else {}
            result = await session.call_tool(tool, arguments)
        return result, init


def texts(result: object) -> list[str]:
    return [getattr(c, "text", None) for c in getattr(result, "content", [])]


def test_zero_config_discovers_registers_logs_in_and_relays(
    host: Host, server: OAuthMCPServer
) -> None:
    result, init = anyio.run(
        call_echo, host, server.url, "hello", "--browser", "--log-level", "trace"
    )
    assert texts(result) == ["echo: hello"]
    assert init.server_info.name == "proxy-test"
    # Discovery: the resource's metadata (path-aware well-known URL), then the server's.
    assert server.requests_to("/.well-known/oauth-protected-resource/mcp", "GET")
    assert server.requests_to("/.well-known/oauth-authorization-server", "GET")
    # One registration, as a native public client on a fixed loopback port.
    registrations = server.requests_to("/register", "POST")
    assert len(registrations) == 1
    metadata = json.loads(registrations[0].body)
    assert metadata["client_name"] == "tokenrelay"
    assert metadata["application_type"] == "native"
    # `none` unless the server requires otherwise: the SDK's server lists only secret methods.
    assert metadata["token_endpoint_auth_method"] == "client_secret_post"
    assert metadata["grant_types"] == ["authorization_code", "refresh_token"]
    assert all(
        u.startswith("http://127.0.0.1:") and not u.startswith("http://127.0.0.1:0/")
        for u in metadata["redirect_uris"]
    )
    # One login with PKCE S256 and the resource on the authorization and the token request.
    authorizes = server.requests_to("/authorize", "GET")
    assert len(authorizes) == 1 and len(host.logins()) == 1
    query = authorizes[0].query
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    assert query["resource"] == [server.url]
    tokens = server.requests_to("/token", "POST")
    assert len(tokens) == 1
    assert tokens[0].form["grant_type"] == ["authorization_code"]
    assert tokens[0].form["resource"] == [server.url]
    assert tokens[0].form["code_verifier"][0]
    # The login URL went to stderr; no token anywhere on it (trace level).
    stderr = host.stderr()
    assert "/authorize?" in stderr
    for token in (
        list(server.provider.access)
        + list(server.provider.refresh)
        + server.provider.spent_refresh
    ):
        assert token not in stderr


async def run_many(host: Host, url: str, count: int) -> list[list[str]]:
    results: list[list[str]] = [[] for _ in range(count)]

    async def one(index: int) -> None:
        result, _ = await call_echo(host, url, f"window {index}", "--browser")
        results[index] = texts(result)

    async with anyio.create_task_group() as group:
        for index in range(count):
            group.start_soon(one, index)
    return results


def test_three_windows_share_one_registration_and_one_login(
    host: Host, server: OAuthMCPServer
) -> None:
    assert anyio.run(run_many, host, server.url, 3) == [
        [f"echo: window {i}"] for i in range(3)
    ]
    assert len(server.requests_to("/register", "POST")) == 1
    assert len(server.requests_to("/authorize", "GET")) == 1
    assert len(host.logins()) == 1
    assert len(server.requests_to("/token", "POST")) == 1
    # Three more windows later: the stored registration and session serve them all.
    assert anyio.run(run_many, host, server.url, 3) == [
        [f"echo: window {i}"] for i in range(3)
    ]
    assert len(server.requests_to("/register", "POST")) == 1
    assert len(server.requests_to("/authorize", "GET")) == 1
    assert len(server.requests_to("/token", "POST")) == 1
    # The registration is kept in the store (one row for the issuer), shared by every window.
    assert host.registration_count() == 1


def test_revoked_tokens_are_refreshed_and_no_spent_refresh_token_is_sent_again(
    host: Host, server: OAuthMCPServer
) -> None:
    anyio.run(call_echo, host, server.url, "first", "--browser")
    for _ in range(2):
        # The server stops accepting the access tokens it issued: every window gets a 401, renews
        # by refresh token (one refresh through the store's lease), and sends its message again.
        server.provider.access.clear()
        assert anyio.run(run_many, host, server.url, 3) == [
            [f"echo: window {i}"] for i in range(3)
        ]
    refreshes = [
        r
        for r in server.requests_to("/token", "POST")
        if r.form.get("grant_type") == ["refresh_token"]
    ]
    assert len(refreshes) >= 2
    assert all(r.form.get("resource") == [server.url] for r in refreshes)
    sent = [r.form["refresh_token"][0] for r in refreshes]
    assert len(sent) == len(set(sent)), "a spent refresh token was sent again"
    assert server.provider.refresh_replays == []
    assert len(host.logins()) == 1


def refused_start(host: Host, url: str) -> str:
    async def attempt() -> str:
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(host.errlog())
            read, write = await stack.enter_async_context(
                stdio_client(host.params(url, "--browser"), errlog=errlog)
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(60):
                try:
                    await session.initialize()
                except Exception as error:  # the proxy's JSON-RPC error answer
                    return str(error)
            return "initialized"

    return anyio.run(attempt)


AS_ENDPOINTS = ["/register", "/authorize", "/token", "/revoke"]


@pytest.mark.parametrize(
    "server", [Options(prm_resource="http://127.0.0.1:1/elsewhere")], indirect=True
)
def test_a_resource_metadata_naming_another_resource_sends_nothing_to_the_authorization_server(
    host: Host, server: OAuthMCPServer
) -> None:
    message = refused_start(host, server.url)
    assert "could not deliver" in message and "another resource" in message
    assert not server.requests_to("/.well-known/oauth-authorization-server")
    assert not any(server.requests_to(path) for path in AS_ENDPOINTS)
    assert host.logins() == []


@pytest.mark.parametrize(
    "server", [Options(metadata_issuer="http://127.0.0.1:1")], indirect=True
)
def test_metadata_whose_issuer_differs_sends_nothing_to_its_endpoints(
    host: Host, server: OAuthMCPServer
) -> None:
    message = refused_start(host, server.url)
    assert "could not deliver" in message and "issuer" in message
    assert not any(server.requests_to(path) for path in AS_ENDPOINTS)
    assert host.logins() == []


@pytest.mark.parametrize(
    "server", [Options(callback_iss="http://127.0.0.1:1")], indirect=True
)
def test_a_wrong_iss_in_the_authorization_response_sends_nothing_to_the_token_endpoint(
    host: Host, server: OAuthMCPServer
) -> None:
    message = refused_start(host, server.url)
    assert "could not deliver" in message
    assert not server.requests_to("/token")


def test_step_up_asks_once_for_the_union_of_scopes(
    host: Host, server: OAuthMCPServer
) -> None:
    result, _ = anyio.run(
        functools.partial(call_echo, host, server.url, "", "--browser", tool="admin")
    )
    assert texts(result) == ["admin ok"]
    authorizes = server.requests_to("/authorize", "GET")
    assert len(authorizes) == 2
    assert set(authorizes[1].query["scope"][0].split()) >= {"mcp", "extra"}
    assert authorizes[1].query["resource"] == [server.url]


def test_a_request_profile_with_discover_works_against_the_same_server(
    host: Host, server: OAuthMCPServer
) -> None:
    import subprocess

    config = host.directory / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            store: {{ path: {host.state}/tokenrelay/sessions.db }}
            environments:
              remote:
                base_url: {server.url}
                profiles:
                  me:
                    type: authorization_code
                    discover: true
                    open_browser: true
            """
        )
    )
    env = {**os.environ, **host.env}
    login = subprocess.run(
        [binary(), "login", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert login.returncode == 0, login.stderr
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    )
    call = subprocess.run(
        [
            binary(),
            "call",
            "POST",
            server.url,
            "--config",
            str(config),
            "--json",
            body,
            "-H",
            "Accept: application/json, text/event-stream",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert call.returncode == 0, call.stderr
    assert "proxy-test" in call.stdout
    tokens = server.requests_to("/token", "POST")
    assert len(tokens) == 1 and tokens[0].form["resource"] == [server.url]
    assert len(server.requests_to("/register", "POST")) == 1
    # The same profile behind `mcp-proxy --env`: its session, no new login or registration.
    # (call_echo's URL slot carries `--env`; its extra arguments `remote --config PATH`)
    result, _ = anyio.run(
        call_echo, host, "--env", "via env", "remote", "--config", str(config)
    )
    assert texts(result) == ["echo: via env"]
    assert len(server.requests_to("/authorize", "GET")) == 1
    assert len(server.requests_to("/register", "POST")) == 1


def test_stdout_carries_only_the_servers_messages_with_2026_request_headers(
    host: Host, server: OAuthMCPServer
) -> None:
    """Raw stdio: every stdout line is a JSON-RPC message from the server; no token anywhere."""
    import subprocess

    anyio.run(call_echo, host, server.url, "warm", "--browser")  # logs in
    process = subprocess.Popen(
        [binary(), "mcp-proxy", server.url, "--log-level", "trace"],
        env={**os.environ, **host.env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "raw"}},
    }
    assert process.stdin and process.stdout
    process.stdin.write((json.dumps(init) + "\n").encode())
    process.stdin.flush()
    first = json.loads(process.stdout.readline())
    process.stdin.write(
        (
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        ).encode()
    )
    process.stdin.write((json.dumps(call) + "\n").encode())
    process.stdin.flush()
    second = json.loads(process.stdout.readline())
    rest, stderr = process.communicate(timeout=60)
    assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "proxy-test"
    assert second["id"] == 2 and second["result"]["content"][0]["text"] == "echo: raw"
    for line in rest.decode().splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0"
    posts = [
        r
        for r in server.requests_to("/mcp", "POST")
        if r.headers.get("mcp-method") == "tools/call"
    ]
    assert posts and posts[-1].headers.get("mcp-name") == "echo"
    assert (
        posts[-1].headers.get("mcp-protocol-version")
        == first["result"]["protocolVersion"]
    )
    assert posts[-1].headers.get("mcp-session-id")
    assert server.requests_to("/mcp", "DELETE"), "the session is ended at exit"
    everything = rest.decode() + stderr.decode()
    for token in (
        list(server.provider.access)
        + list(server.provider.refresh)
        + server.provider.spent_refresh
    ):
        assert token not in everything


def run_modern(host: Host, server: OAuthMCPServer, body: Any) -> Any:
    """Runs `body(client)` with the SDK's own client in the 2026-07-28 revision, through a proxy."""
    from mcp import Client

    async def modern() -> Any:
        async with Client(
            host.params(server.url, "--browser"), mode="2026-07-28"
        ) as client:
            with anyio.fail_after(120):
                return await body(client)

    return anyio.run(modern)


def posted(server: OAuthMCPServer, header: str, value: str) -> list[Recorded]:
    """The POSTs to the MCP endpoint whose `header` was `value`, in order."""
    return [
        r for r in server.requests_to("/mcp", "POST") if r.headers.get(header) == value
    ]


def test_a_2026_client_is_relayed_with_per_request_metadata_and_a_listen_stream(
    host: Host, server: OAuthMCPServer
) -> None:
    async def body(client: Any) -> list[str]:
        result = await client.call_tool("echo", {"text": "modern"})
        async with client.listen(tools_list_changed=True):
            pass  # entered once the server acknowledged the subscription on the stream
        return texts(result)

    assert run_modern(host, server, body) == ["echo: modern"]
    calls = posted(server, "mcp-method", "tools/call")
    assert calls and calls[-1].headers.get("mcp-protocol-version") == "2026-07-28"
    assert calls[-1].headers.get("mcp-name") == "echo"
    assert not calls[-1].headers.get("mcp-session-id")
    assert posted(server, "mcp-method", "subscriptions/listen")


def test_tool_parameters_marked_x_mcp_header_are_mirrored_into_headers(
    host: Host, server: OAuthMCPServer
) -> None:
    async def body(client: Any) -> list[str]:
        listed = await client.list_tools()
        assert "regional" in [tool.name for tool in listed.tools]
        return texts(
            await client.call_tool("regional", {"region": "Zürich 1", "limit": 3})
        )

    # The SDK's server checks each Mcp-Param-* header against the body (HeaderMismatch otherwise).
    assert run_modern(host, server, body) == ["Zürich 1: 3"]
    calls = posted(server, "mcp-name", "regional")
    assert calls[-1].headers.get("mcp-param-limit") == "3"
    region = calls[-1].headers.get("mcp-param-region")
    assert region == "=?base64?" + base64.b64encode("Zürich 1".encode()).decode() + "?="


def test_a_call_refused_for_its_headers_lists_the_tools_and_is_sent_once_more(
    host: Host, server: OAuthMCPServer
) -> None:
    """A client that calls a tool the proxy has not seen listed (its list cached from an earlier
    session): the server answers HeaderMismatch; the proxy lists the tools itself and sends the
    call again with the Mcp-Param headers (the spec's SHOULD)."""

    async def body(client: Any) -> list[str]:
        return texts(await client.call_tool("regional", {"region": "eu-west-1"}))

    assert run_modern(host, server, body) == ["eu-west-1: 10"]
    # SPEC §9.1: the first message of a process goes without a token; its 401 starts discovery.
    calls = [
        c
        for c in posted(server, "mcp-name", "regional")
        if "authorization" in c.headers
    ]
    if (
        len(calls) == 2
    ):  # the client did not list the tools itself: the proxy did, in between
        assert calls[0].headers.get("mcp-param-region") is None
        assert calls[1].headers.get("mcp-param-region") == "eu-west-1"
        posts = server.requests_to("/mcp", "POST")
        assert any(b'"id":"tokenrelay-tools-list"' in r.body for r in posts)
    else:
        assert (
            len(calls) == 1 and calls[0].headers.get("mcp-param-region") == "eu-west-1"
        )


def test_a_request_profile_steps_up_on_insufficient_scope(
    host: Host, server: OAuthMCPServer
) -> None:
    """`serve`: a 403 insufficient_scope makes the session ask for the union; the next request
    needs a login, which asks for it."""
    import subprocess

    config = host.directory / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            store: {{ path: {host.state}/tokenrelay/sessions.db }}
            environments:
              remote:
                base_url: {server.url}
                profiles:
                  me:
                    type: authorization_code
                    discover: true
                    open_browser: true
            """
        )
    )
    process = subprocess.Popen(
        [binary(), "serve", "--config", str(config)],
        env={**os.environ, **host.env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin and process.stdout
    answers = iter(process.stdout)

    def call(number: int, method: str, params: dict[str, object]) -> dict[str, object]:
        assert process.stdin
        process.stdin.write(
            (
                json.dumps(
                    {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
                )
                + "\n"
            ).encode()
        )
        process.stdin.flush()
        for line in answers:
            message = json.loads(line)
            if message.get("id") == number:
                return message
        raise AssertionError("no answer")

    admin = {
        "method": "POST",
        "url": server.url,
        "headers": {"Accept": "application/json, text/event-stream"},
        "json": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "admin", "arguments": {}},
        },
    }
    try:
        assert "result" in call(1, "login", {})
        assert call(2, "request", admin)["result"]["status"] == 403
        needs_login = call(3, "request", admin)
        assert needs_login["error"]["data"]["kind"] == "interaction_required"
        assert "result" in call(4, "login", {})
        authorizes = server.requests_to("/authorize", "GET")
        assert len(authorizes) == 2 and {"mcp", "extra"} <= set(
            authorizes[1].query["scope"][0].split()
        )
        # Past the scope check: the server answers the call itself (a stateful server wants its session).
        assert call(5, "request", admin)["result"]["status"] != 403
    finally:
        process.stdin.close()
        process.wait(timeout=60)


def test_a_refused_registration_is_made_again(
    host: Host, server: OAuthMCPServer
) -> None:
    anyio.run(call_echo, host, server.url, "first", "--browser")
    # The server forgets the client (its registration expired) and the tokens it issued.
    server.provider.clients.clear()
    server.provider.access.clear()
    result, _ = anyio.run(call_echo, host, server.url, "again", "--browser")
    assert texts(result) == ["echo: again"]
    assert len(server.requests_to("/register", "POST")) == 2
    assert len(host.logins()) == 2
    assert host.registration_count() == 1


def test_the_scope_of_a_401_is_asked_for_with_the_held_ones(
    host: Host, server: OAuthMCPServer
) -> None:
    result, _ = anyio.run(
        functools.partial(call_echo, host, server.url, "", "--browser", tool="reports")
    )
    assert texts(result) == ["reports ok"]
    authorizes = server.requests_to("/authorize", "GET")
    assert len(authorizes) == 2
    assert {"mcp", "extra"} <= set(authorizes[1].query["scope"][0].split())


class RawProxy:
    """A proxy driven over raw stdio, so every line it writes is seen (SPEC §9.6: each request
    answered exactly once)."""

    def __init__(
        self, host: Host, url: str, *extra: str, args: list[str] | None = None
    ) -> None:
        import queue
        import subprocess
        import threading

        self.errlog = host.errlog()
        self.process = subprocess.Popen(
            [binary(), "mcp-proxy", *(args or [url, "--browser", *extra])],
            env={**os.environ, **host.env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
        )
        self.lines: "queue.Queue[bytes]" = queue.Queue()
        self.seen: list[dict[str, Any]] = []

        def pump() -> None:
            assert self.process.stdout
            for line in self.process.stdout:
                self.lines.put(line)
            self.lines.put(b"")

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()

    def send(self, message: dict[str, Any]) -> None:
        self.write((json.dumps(message) + "\n").encode())

    def write(self, data: bytes) -> None:
        assert self.process.stdin
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def answer(self, id: Any) -> dict[str, Any]:
        """Reads until the answer to `id` (a 5-minute hang net, not a timed assertion)."""
        while True:
            line = self.lines.get(timeout=300)
            assert line, f"stdout ended before the answer to {id}"
            message = json.loads(line)
            self.seen.append(message)
            if message.get("id") == id and "method" not in message:
                return message

    def initialize(self) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert "result" in self.answer("init")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, id: Any, tool: str, arguments: dict[str, Any]) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
        )

    def close(self) -> list[dict[str, Any]]:
        """Ends stdin, reads stdout to its end; every message seen."""
        assert self.process.stdin
        self.process.stdin.close()
        while line := self.lines.get(timeout=300):
            self.seen.append(json.loads(line))
        self.process.wait(timeout=300)
        self.errlog.close()
        return self.seen

    def answers_by_id(self) -> dict[Any, int]:
        counts: dict[Any, int] = {}
        for message in self.seen:
            if "method" not in message and "id" in message:
                key = json.dumps(message["id"])
                counts[key] = counts.get(key, 0) + 1
        return counts


@pytest.mark.parametrize("server", [Options(token_lifetime=1)], indirect=True)
def test_every_request_is_answered_once_when_its_token_expired_50_times(
    host: Host, server: OAuthMCPServer
) -> None:
    """Tokens of 1 s: the proxy renews them as they expire, and the server refuses some that
    expire on the way (401), which the proxy renews and sends again."""
    proxy = RawProxy(host, server.url)
    proxy.initialize()
    for index in range(50):
        proxy.call(index, "echo", {"text": f"call {index}"})
        answer = proxy.answer(index)
        assert "result" in answer, (answer, host.stderr()[-3000:])
        assert answer["result"]["content"][0]["text"] == f"echo: call {index}", answer
    proxy.close()
    counts = proxy.answers_by_id()
    assert all(count == 1 for count in counts.values()), counts
    assert len(counts) == 51
    assert len(host.logins()) == 1


@pytest.mark.parametrize("server", [Options(break_after_answer=True)], indirect=True)
def test_a_stream_that_breaks_right_after_the_answer_is_answered_once(
    host: Host, server: OAuthMCPServer
) -> None:
    proxy = RawProxy(host, server.url)
    proxy.initialize()
    for index in range(3):
        proxy.call(index, "echo", {"text": "once"})
        assert proxy.answer(index)["result"]["content"][0]["text"] == "echo: once"
    proxy.close()
    counts = proxy.answers_by_id()
    assert all(count == 1 for count in counts.values()), (counts, proxy.seen)


def test_a_3_mb_answer_on_one_event_stream_line_is_relayed_whole(
    host: Host, server: OAuthMCPServer
) -> None:
    proxy = RawProxy(host, server.url)
    proxy.initialize()
    size = 3 * 1024 * 1024
    proxy.call(1, "big", {"size": size})
    answer = proxy.answer(1)
    proxy.close()
    assert answer["result"]["content"][0]["text"] == "x" * size
    assert proxy.answers_by_id() == {'"init"': 1, "1": 1}


def test_a_10_mb_line_and_10000_unread_requests_leave_the_proxy_up_and_bounded(
    host: Host, server: OAuthMCPServer
) -> None:
    proxy = RawProxy(host, server.url)
    proxy.initialize()
    # One 10 MB line: read (within serve's 64 MiB line bound), forwarded and answered once (the
    # SDK's server refuses so large a body: an error answer that says its kind).
    proxy.call("huge", "echo", {"text": "y" * (10 * 1024 * 1024)})
    huge = proxy.answer("huge")
    assert "result" in huge or huge["error"]["data"]["kind"] == "http_status", huge
    # 10,000 requests written at once while nothing is read: at most
    # max_concurrent_requests (256) POSTs in flight, stdin paused while they are all taken.
    before = len(server.requests_to("/mcp", "POST"))
    batch = b"".join(
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": f"n{index}",
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "n"}},
                }
            )
            + "\n"
        ).encode()
        for index in range(10_000)
    )
    import threading

    writer = threading.Thread(target=proxy.write, args=(batch,), daemon=True)
    writer.start()
    writer.join(
        timeout=300
    )  # all written while nothing is read (the answers fit the output bound)
    assert not writer.is_alive(), "the proxy stopped reading its stdin"
    assert proxy.process.poll() is None, "the proxy stopped"
    status = Path(f"/proc/{proxy.process.pid}/status").read_text()
    rss_kib = int(
        next(x for x in status.splitlines() if x.startswith("VmRSS:")).split()[1]
    )
    seen = 0
    while seen < 10_000:
        line = proxy.lines.get(timeout=300)
        assert line, "stdout ended"
        message = json.loads(line)
        proxy.seen.append(message)
        if str(message.get("id", "")).startswith("n"):
            seen += 1
    proxy.close()
    assert len(server.requests_to("/mcp", "POST")) - before >= 10_000
    assert all(count == 1 for count in proxy.answers_by_id().values())
    # The proxy holds at most 256; the server counts a call until its handler returns, a little
    # after its last byte was sent, so a few more may overlap there.
    assert server.most_calls_in_flight <= 256 + 8, server.most_calls_in_flight
    assert rss_kib < 256 * 1024, f"{rss_kib} KiB resident"


@pytest.fixture
def dpop_server() -> Iterator[DPoPMCPServer]:
    running = DPoPMCPServer().start()
    yield running
    running.stop()


def dpop_proxy(host: Host, server: DPoPMCPServer) -> RawProxy:
    """`mcp-proxy --env dp` with a client_credentials profile that has `dpop: true`."""
    config = host.directory / "config.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            store: {{ path: {host.state}/tokenrelay/sessions.db }}
            environments:
              dp:
                base_url: {server.url}
                profiles:
                  svc:
                    type: client_credentials
                    token_url: {server.token_url}
                    client_id: mcp-dpop
                    client_auth: none
                    dpop: true
            """
        )
    )
    return RawProxy(
        host,
        server.url,
        args=["--env", "dp", "--config", str(config), "--log-level", "trace"],
    )


def test_a_dpop_bound_session_proves_every_request_and_answers_one_nonce_challenge(
    host: Host, dpop_server: DPoPMCPServer
) -> None:
    proxy = dpop_proxy(host, dpop_server)
    proxy.initialize()
    proxy.call(1, "echo", {"text": "bound"})
    answer = proxy.answer(1)
    proxy.close()
    assert answer["result"]["content"][0]["text"] == "echo: bound", (
        answer,
        host.stderr()[-3000:],
    )
    assert proxy.answers_by_id() == {'"init"': 1, "1": 1}
    # One nonce challenge, answered by one re-signed retry; nothing else refused.
    assert dpop_server.refusals == ["use_dpop_nonce"], dpop_server.refusals
    token_proofs = [p for p in dpop_server.proofs if p.path == "/token"]
    mcp_proofs = [p for p in dpop_server.proofs if p.path == "/mcp"]
    assert len(token_proofs) == 1 and "ath" not in token_proofs[0].claims
    # POSTs: initialize (refused for its nonce, then signed again), notifications/initialized,
    # tools/call; and the GET of the server's own stream. Each with `ath` and its own `jti`.
    posts = [p for p in mcp_proofs if p.claims["htm"] == "POST"]
    assert len(posts) == 4, [p.claims for p in mcp_proofs]
    assert all(p.claims.get("ath") for p in mcp_proofs)
    assert "nonce" not in mcp_proofs[0].claims
    assert all(p.claims.get("nonce") == dpop_server.nonce for p in mcp_proofs[1:])
    assert len({p.claims["jti"] for p in mcp_proofs}) == len(mcp_proofs)
    # Each message reached the server once (the refused one was not acted on).
    methods = [m.get("method") for m in dpop_server.messages]
    assert methods == ["initialize", "notifications/initialized", "tools/call"]
    # Canary: no token and no proof on stdout or stderr (trace level).
    everything = json.dumps(proxy.seen) + host.stderr()
    for token in dpop_server.tokens:
        assert token not in everything
    for proof in dpop_server.proofs:
        assert proof.claims["jti"] not in everything
    assert "dpop+jwt" not in everything and "eyJ" not in everything


def test_a_cancelled_request_is_relayed_to_the_server_and_never_answered_by_the_proxy(
    host: Host, dpop_server: DPoPMCPServer
) -> None:
    """MCP: `notifications/cancelled` is a notification the proxy relays, and no response SHOULD
    be sent for a cancelled request: the server closes the held call's stream unanswered, and the
    proxy does not answer it with an error of its own."""
    proxy = dpop_proxy(host, dpop_server)
    proxy.initialize()
    proxy.call("held", "hold", {})
    assert dpop_server.held_started.wait(300), "the server never held the call"
    proxy.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "held", "reason": "the person gave up"},
        }
    )
    # A later call is answered: everything before it on stdout has been seen by then.
    proxy.call(2, "echo", {"text": "after"})
    assert proxy.answer(2)["result"]["content"][0]["text"] == "echo: after"
    proxy.close()
    cancels = [
        m for m in dpop_server.messages if m.get("method") == "notifications/cancelled"
    ]
    assert cancels and cancels[0]["params"]["requestId"] == "held"
    assert proxy.answers_by_id() == {'"init"': 1, "2": 1}, proxy.seen
