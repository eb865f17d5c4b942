"""`tokenrelay mcp-proxy` against the official MCP Python SDK's OAuth-protected server, driven
by the SDK's own MCP client over stdio (SPEC §9, issue 38)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).parent))
from oauth_mcp_server import OAuthMCPServer, Options  # noqa: E402

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
    path = os.environ.get("TOKENRELAY_BIN") or str(ROOT / ".build" / "debug" / "tokenrelay")
    if not os.path.exists(path):
        pytest.fail(f"no tokenrelay binary at {path} (swift build first, or set TOKENRELAY_BIN)")
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
        script.write_text(BROWSER.replace("PYTHON", sys.executable).replace("LOG", str(self.browser_log)))
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.env = {
            "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "XDG_STATE_HOME": str(self.state),
            "HOME": str(directory),
        }
        self.stderr_paths: list[Path] = []

    def logins(self) -> list[str]:
        return self.browser_log.read_text().splitlines() if self.browser_log.exists() else []

    def params(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(command=binary(), args=["mcp-proxy", *args], env=self.env)

    def errlog(self):
        path = self.directory / f"stderr-{len(self.stderr_paths)}.log"
        self.stderr_paths.append(path)
        return open(path, "w")

    def stderr(self) -> str:
        return "".join(p.read_text() for p in self.stderr_paths if p.exists())

    def stored_text(self) -> bytes:
        database = self.state / "tokenrelay" / "sessions.db"
        with sqlite3.connect(database) as connection:
            rows = connection.execute("SELECT payload FROM sessions").fetchall()
            rows += connection.execute("SELECT payload FROM registrations").fetchall()
        return b"".join(bytes(r[0]) for r in rows)


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


async def call_echo(host: Host, url: str, text: str, *extra: str, tool: str = "echo") -> tuple[object, object]:
    """Starts one proxy, initializes, calls a tool; returns the tool result and the init result."""
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(host.errlog())
        read, write = await stack.enter_async_context(stdio_client(host.params(url, *extra), errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(120):
            init = await session.initialize()
            arguments = {"text": text} if tool == "echo" else {}
            result = await session.call_tool(tool, arguments)
        return result, init


def texts(result: object) -> list[str]:
    return [getattr(c, "text", None) for c in getattr(result, "content", [])]


def test_zero_config_discovers_registers_logs_in_and_relays(host: Host, server: OAuthMCPServer) -> None:
    result, init = anyio.run(call_echo, host, server.url, "hello", "--browser", "--log-level", "trace")
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
    assert all(u.startswith("http://127.0.0.1:") and not u.startswith("http://127.0.0.1:0/") for u in metadata["redirect_uris"])
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
    for token in list(server.provider.access) + list(server.provider.refresh) + server.provider.spent_refresh:
        assert token not in stderr
