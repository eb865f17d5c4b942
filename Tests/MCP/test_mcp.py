"""`tokenrelay mcp` end to end (SPEC §8): the official MCP Python SDK (and raw JSON-RPC lines where
the SDK has no knob) driving the real binary over stdio, against a loopback API that records every
request it receives. Run: .venv/bin/python -m pytest -q Tests/MCP (the binary from `swift build`, or
$TOKENRELAY_BIN; the OAuth test needs the interop stack: $TOKENRELAY_STACK_ENV)."""

import asyncio
import base64
import gzip
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, stdio_client, types

ROOT = Path(__file__).resolve().parents[2]
KEY = "canary-api-key-7f3a9c1e5b"
BEARER = "canary-bearer-token-2d8e4f6a"
PROTOCOL_2026 = "2026-07-28"


def binary():
    path = os.environ.get("TOKENRELAY_BIN") or str(ROOT / ".build" / "debug" / "tokenrelay")
    if not os.path.exists(path):
        pytest.skip("tokenrelay is not built (swift build) and $TOKENRELAY_BIN is unset")
    return path


class API:
    """A loopback API: records every request; /v1/echo answers the request back (headers, body)
    and repeats the X-API-Key in a response header; /v1/big a long multi-byte body; /v1/status/N
    that status; anything else {"ok": true}."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        self.slow_arrived = threading.Event()
        self.slow_release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                with api.lock:
                    api.requests.append({"method": self.command, "path": self.path,
                                         "headers": dict(self.headers.items()), "body": body})
                path = self.path.split("?")[0]
                status, extra = 200, {}
                if path == "/v1/slow":
                    api.slow_arrived.set()
                    api.slow_release.wait(10)
                if path == "/v1/echo":
                    payload = {"headers": dict(self.headers.items()), "body": body, "path": self.path}
                    extra["X-Echo-Key"] = self.headers.get("X-API-Key", "")
                    data = json.dumps(payload).encode()
                    content_type = "application/json"
                    if "gzip" in (self.headers.get("Accept-Encoding") or ""):  # compressed when asked
                        data = gzip.compress(data)
                        extra["Content-Encoding"] = "gzip"
                elif path.startswith("/v1/echo-coded/"):  # compressed unasked
                    coding = path.rsplit("/", 1)[1]
                    data = json.dumps({"headers": dict(self.headers.items())}).encode()
                    data = {"gzip": gzip.compress, "deflate": zlib.compress}.get(coding, lambda d: d)(data)
                    extra["Content-Encoding"] = coding
                    content_type = "application/json"
                elif path == "/v1/echo-encoded":
                    data = json.dumps(encoded_forms(self.headers)).encode()
                    content_type = "application/json"
                elif path == "/v1/echo-text":
                    data = ("auth was " + self.headers.get("Authorization", "") + " key was "
                            + self.headers.get("X-API-Key", "")).encode()
                    content_type = "text/plain; charset=utf-8"
                elif path == "/v1/big":
                    data = ("é" * 3000).encode()
                    content_type = "text/plain; charset=utf-8"
                elif path.startswith("/v1/status/"):
                    status = int(path.rsplit("/", 1)[1])
                    data = b'{"error":"as asked"}'
                    content_type = "application/json"
                else:
                    data = json.dumps({"ok": True, "path": self.path}).encode()
                    content_type = "application/json"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a cancelled transfer closed the connection

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, method=None, path=None):
        with self.lock:
            return sum(1 for r in self.requests
                       if (method is None or r["method"] == method) and (path is None or r["path"] == path))

    def clear(self):
        with self.lock:
            self.requests.clear()


def encoded_forms(headers):
    """What /v1/echo-encoded answers: the credentials it received, encoded as APIs echo them:
    percent-encoded (each spelling), base64 and base64url at each offset inside a longer value,
    padded or not, and re-encoded as a Basic credential; each value the exact one sent back."""
    forms = {}
    values = {"key": headers.get("X-API-Key") or "",
              "bearer": (headers.get("Authorization") or "").removeprefix("Bearer ")}
    for name, value in values.items():
        if not value:
            continue
        raw = value.encode()
        forms[f"{name}-quote"] = urllib.parse.quote(value, safe="")
        forms[f"{name}-quote-plus"] = urllib.parse.quote_plus(value + " x")
        forms[f"{name}-all-upper"] = "".join(f"%{b:02X}" for b in raw)
        forms[f"{name}-all-lower"] = "".join(f"%{b:02x}" for b in raw)
        forms[f"{name}-form-body"] = urllib.parse.urlencode({"token": value, "note": "a b"})
        forms[f"{name}-basic"] = "Basic " + base64.b64encode(b"agent:" + raw).decode()
        for before in range(3):
            data = b"x" * before + raw + b"y"
            forms[f"{name}-b64-{before}"] = base64.b64encode(data).decode()
            forms[f"{name}-b64url-{before}"] = base64.urlsafe_b64encode(data).decode().rstrip("=")
            forms[f"{name}-b64-quoted-{before}"] = urllib.parse.quote(base64.b64encode(data).decode(), safe="")
    return forms


@pytest.fixture(scope="module")
def api():
    server = API()
    yield server
    server.server.shutdown()


def write_config(directory, api, stack=None, allow_extra=(), deny_extra=(), server=None):
    base = f"http://127.0.0.1:{api.port}/v1"
    config = {
        "version": 1,
        "default_environment": "api",
        "store": {"type": "sqlite", "path": os.path.join(directory, "sessions.db")},
        "environments": {
            "api": {
                "base_url": base,
                "default_profile": "key",
                "mcp": {
                    "allow": ["GET /repos/**", "* /echo", "GET /echo-text", "GET /big", "GET /status/*", "GET /slow",
                              "GET /echo-coded/*", "GET /echo-encoded", *allow_extra],
                    "deny": ["* /repos/*/secret/**", *deny_extra],
                    "confirm": ["POST /repos/*/issues"],
                    "max_response_bytes": 1000,
                },
                "profiles": {
                    "key": {"type": "api_key", "header": "X-API-Key", "value": {"env": "MCP_TEST_KEY"}},
                    "bearer": {"type": "bearer", "token": {"env": "MCP_TEST_BEARER"}},
                },
            },
            # Same API, no mcp block: never reachable by an agent.
            "hidden": {"base_url": base,
                       "profiles": {"bearer": {"type": "bearer", "token": {"env": "MCP_TEST_BEARER"}}}},
            # A person must log in first.
            "login": {
                "base_url": base,
                "profiles": {"me": {
                    "type": "authorization_code", "client_id": "agent-test",
                    "token_url": f"http://127.0.0.1:{api.port}/token",
                    "authorization_url": f"http://127.0.0.1:{api.port}/authorize",
                    "mcp": {"allow": ["GET /**"]},
                }},
            },
        },
    }
    if server:
        config["server"] = server
    if stack:
        endpoint = {"token_url": stack["TOKEN_URL"]} if stack.get("TOKEN_URL") else {}
        config["environments"]["stack"] = {
            "base_url": stack["RS_URL"],
            "default_profile": "service",
            "mcp": {"allow": ["GET /**"]},
            "profiles": {"service": {
                "type": "client_credentials", "issuer": stack.get("ISSUER") or stack.get("AS_URL"),
                "client_id": stack.get("CLIENT_ID", "svc"), "client_secret": {"env": "MCP_TEST_CLIENT_SECRET"},
                **endpoint,
            }},
        }
        if stack.get("AS_URL"):
            # A person's login: device code as the AS's public client ``tv``.
            config["environments"]["stack"]["profiles"]["tv"] = {
                "type": "device_code", "issuer": stack.get("ISSUER") or stack.get("AS_URL"), **endpoint,
                "device_authorization_url": stack["AS_URL"].rstrip("/") + "/o/device-authorization/",
                "client_id": "tv",
            }
    path = os.path.join(directory, "config.yaml")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    return path


def environ(directory, stack=None):
    env = dict(os.environ)
    env.update({"MCP_TEST_KEY": KEY, "MCP_TEST_BEARER": BEARER, "XDG_STATE_HOME": directory,
                "HOME": directory})
    if stack:
        env["MCP_TEST_CLIENT_SECRET"] = stack.get("CLIENT_SECRET", "svc-secret")
    return env


@pytest.fixture
def workdir():
    with tempfile.TemporaryDirectory() as directory:
        yield directory


def sdk_client(config, directory, *, mode="legacy", elicit=None, errlog=None, stack=None, args=()):
    params = StdioServerParameters(command=binary(), args=["mcp", "--config", config, *args],
                                   env=environ(directory, stack))
    transport = stdio_client(params, errlog=errlog) if errlog else params
    return Client(transport, mode=mode, elicitation_callback=elicit, read_timeout_seconds=20)


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def run(coroutine):
    return asyncio.run(coroutine)


class Raw:
    """`tokenrelay mcp` driven by raw JSON-RPC lines (what the SDK does not let a test choose)."""

    def __init__(self, config, directory, args=(), stack=None):
        self.process = subprocess.Popen([binary(), "mcp", "--config", config, *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env=environ(directory, stack))
        self.stdout = b""
        self.buffer = b""

    def send(self, message):
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def read(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(line)
                if predicate(message):
                    return message
            remaining = deadline - time.monotonic()
            assert remaining > 0, "no matching message in time"
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                assert chunk, "tokenrelay mcp closed its stdout"
                self.stdout += chunk
                self.buffer += chunk

    def request(self, id, method, params=None, timeout=15):
        message = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read(lambda m: m.get("id") == id and "method" not in m, timeout)

    def wait_stderr(self, text, timeout=60):
        """Reads the server's log (stderr) until a line contains `text`: an event, not a sleep."""
        deadline = time.monotonic() + timeout
        buffer = b""
        while text.encode() not in buffer:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no log line with {text!r} in time"
            ready, _, _ = select.select([self.process.stderr], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stderr.fileno(), 65536)
                assert chunk, "tokenrelay mcp closed its stderr"
                buffer += chunk

    def close(self):
        out, err = self.process.communicate(timeout=20)  # closes stdin: the server drains and exits
        self.stdout += out
        return self.stdout, err


def meta(capabilities=None):
    return {"io.modelcontextprotocol/protocolVersion": PROTOCOL_2026,
            "io.modelcontextprotocol/clientCapabilities": capabilities or {}}


# --- Handshake revisions --------------------------------------------------------------------


def test_sdk_handshake_lists_tools_and_calls_with_api_key_and_bearer(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            assert client.protocol_version == "2025-11-25"
            tools = (await client.list_tools()).tools
            assert [tool.name for tool in tools] == ["http_request", "list_environments"]
            schema = tools[0].input_schema
            assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
            assert schema["properties"]["environment"]["enum"] == ["api", "login"]
            assert sorted(schema["properties"]["profile"]["enum"]) == ["bearer", "key", "me"]
            assert tools[0].output_schema["required"] == ["status", "headers", "truncated"]

            api.clear()
            result = await client.call_tool("http_request", {"method": "GET", "path": "/repos/{owner}/x",
                                                             "pathParams": {"owner": "me"}, "query": {"q": "1"}})
            assert result.is_error is False, text_of(result)
            assert result.structured_content["status"] == 200
            assert result.structured_content["json"]["path"] == "/v1/repos/me/x?q=1"
            assert result.structured_content["truncated"] is False
            assert api.requests[-1]["headers"]["X-API-Key"] == KEY

            result = await client.call_tool("http_request", {"profile": "bearer", "path": "/repos/a"})
            assert result.is_error is False, text_of(result)
            assert api.requests[-1]["headers"]["Authorization"] == f"Bearer {BEARER}"

            result = await client.call_tool("http_request", {"path": "/status/404"})
            assert result.is_error is False
            assert result.structured_content["status"] == 404
            assert result.content[0].text.startswith("HTTP 404")

            refused = await client.call_tool("http_request", {"method": "DELETE", "path": "/repos/a"})
            assert refused.is_error is True

            listing = await client.call_tool("list_environments", {})
            assert listing.is_error is False
            # The process counts what became of the agent's calls (the person sees it here and at exit).
            assert listing.structured_content["toolCalls"] == {"sent": 3, "refused": 1, "failed": 0, "awaiting": 0}
            assert "3 sent, 1 refused" in text_of(listing)
            names = [e["name"] for e in listing.structured_content["environments"]]
            assert names == ["api", "login"]
            login = listing.structured_content["environments"][1]["profiles"][0]
            assert login["session"] == "not logged in"
            assert KEY not in json.dumps(listing.structured_content) and BEARER not in text_of(listing)

    run(scenario())


def test_raw_handshake_2025_06_18_negotiation_and_ping(api, workdir):
    raw = Raw(write_config(workdir, api), workdir)
    answer = raw.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "raw", "version": "0"}})
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    assert answer["result"]["capabilities"]["tools"] == {"listChanged": True}
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert raw.request(2, "ping")["result"] == {}
    listed = raw.request(3, "tools/list")["result"]
    assert "resultType" not in listed and [t["name"] for t in listed["tools"]] == ["http_request", "list_environments"]
    # An unknown revision gets the newest handshake revision.
    answer = raw.request(4, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})
    assert answer["result"]["protocolVersion"] == "2025-11-25"
    assert raw.request(5, "tools/call", {"name": "nope", "arguments": {}})["error"]["code"] == -32602
    raw.close()


# --- The stateless revision -----------------------------------------------------------------


def test_sdk_2026_07_28_discovers_and_calls(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir, mode="auto") as client:
            assert client.protocol_version == PROTOCOL_2026
            tools = (await client.list_tools()).tools
            assert [tool.name for tool in tools] == ["http_request", "list_environments"]
            api.clear()
            result = await client.call_tool("http_request", {"path": "/repos/a"})
            assert result.is_error is False, text_of(result)
            assert api.count("GET", "/v1/repos/a") == 1

    run(scenario())


def test_raw_2026_07_28_meta_result_type_cache_hints_and_version_errors(api, workdir):
    raw = Raw(write_config(workdir, api), workdir)
    discovered = raw.request(1, "server/discover", {"_meta": meta()})["result"]
    assert discovered["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18"]
    assert discovered["resultType"] == "complete"
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "tokenrelay"
    listed = raw.request(2, "tools/list", {"_meta": meta()})["result"]
    assert listed["resultType"] == "complete" and listed["ttlMs"] == 0 and listed["cacheScope"] == "private"
    called = raw.request(3, "tools/call", {"_meta": meta(), "name": "http_request",
                                           "arguments": {"path": "/repos/z"}})["result"]
    assert called["resultType"] == "complete" and called["isError"] is False
    error = raw.request(4, "tools/list", {"_meta": {**meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}})
    assert error["error"]["code"] == -32022
    assert error["error"]["data"]["supported"] == ["2026-07-28", "2025-11-25", "2025-06-18"]
    assert error["error"]["data"]["requested"] == "2099-01-01"
    raw.close()


# --- Rules ----------------------------------------------------------------------------------

REFUSED = [
    ({"path": "/repos/a/secret/x"}, "deny"),
    ({"method": "DELETE", "path": "/repos/a"}, "no rule"),
    ({"method": "PUT", "path": "/users/a"}, "no rule"),
    ({"path": "/repos/../admin"}, "'..'"),
    ({"path": "/repos/%2e%2e/admin"}, "'..'"),
    ({"path": "/repos/a%2Fb"}, "encoded '/'"),
    ({"path": "/repos/{x}", "pathParams": {"x": "../../admin"}}, "encoded '/'"),
    ({"url": "http://127.0.0.1:1/v1/repos/a"}, "absolute"),
    ({"path": "http://127.0.0.1:1/v1/repos/a"}, "absolute"),
    ({"path": "//evil.example/repos/a"}, "absolute"),
    ({"environment": "hidden", "path": "/repos/a"}, "not exposed"),
    ({"environment": "nowhere", "path": "/repos/a"}, "not exposed"),
    ({"environment": 7, "path": "/repos/a"}, "must be a string"),
    ({"path": "/repos/a", "method": "GET\r\nX: y"}, "invalid arguments"),
    ({"path": "/repos/a", "headers": {"Authorization": "Bearer mine"}}, "Authorization"),
    ({"path": "/repos/a", "headers": {"cookie": "a=b"}}, "cookie"),
    ({"path": "/repos/a", "headers": {"Proxy-Authorization": "x"}}, "Proxy-Authorization"),
    ({"path": "/repos/a", "headers": {"x-api-key": "mine"}}, "x-api-key"),
    ({"path": "/repos/a", "headers": {"X-HTTP-Method-Override": "DELETE"}}, "override"),
    ({"path": "/repos/a/..;/secret/x"}, "'..'"),
    ({"path": "/repos/a/SECRET/x"}, "deny"),
    ({"path": "/repos/a/secret/"}, "deny"),
]


def test_refused_calls_are_errors_and_send_nothing(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for arguments, fragment in REFUSED:
                api.clear()
                result = await client.call_tool("http_request", arguments)
                assert result.is_error is True, (arguments, text_of(result))
                assert fragment in text_of(result), (arguments, text_of(result))
                assert api.count() == 0, (arguments, api.requests)
            # Still serving, and an allowed call goes through.
            result = await client.call_tool("http_request", {"path": "/repos/%61"})
            assert result.is_error is False and api.count("GET", "/v1/repos/a") == 1

    run(scenario())


WALKED_AROUND_DENY = ["/admin;x/secret", "/ADMIN;jsessionid=1/secret", "/admin;x", "/repos/x/settings;a/hooks",
                      "/admin%3Bx/secret", "/repos/x/SECRET;a/y", "/Admin/secret", "/admin/"]


def test_deny_rules_cannot_be_walked_around_with_path_parameters_case_or_slashes(api, workdir):
    """Tomcat, Jetty and Spring route /admin;x/secret as /admin/secret: a deny rule covers it
    (refused, nothing sent) however the agent spells the path, even under a broad allow."""
    config = write_config(workdir, api, allow_extra=("* /**",),
                          deny_extra=("* /admin/**", "* /repos/*/settings/hooks/**"))

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for path in WALKED_AROUND_DENY:
                api.clear()
                result = await client.call_tool("http_request", {"method": "POST", "path": path})
                assert result.is_error is True, (path, text_of(result))
                assert api.count() == 0, (path, api.requests)
            refused = await client.call_tool("http_request", {"path": "/admin;x/secret"})
            assert "';'" in text_of(refused) and "Tomcat" in text_of(refused), text_of(refused)
            # The broad allow still sends what no deny rule covers.
            api.clear()
            result = await client.call_tool("http_request", {"path": "/administrators"})
            assert result.is_error is False and api.count("GET", "/v1/administrators") == 1

    run(scenario())


UNASKED_CONFIRM = ["/repos/x/issues/", "/repos/x//issues", "/repos/x/Issues", "/repos/x/issues;a", "/REPOS/x/ISSUES",
                   "/repos/x/issue%73"]


def test_confirm_rules_are_not_walked_around_under_a_broad_allow(api, workdir):
    """With `* /repos/**` allowed, a POST a server routes to /repos/x/issues is asked about (or
    refused), never sent unasked: this client cannot be asked, so nothing is sent."""
    config = write_config(workdir, api, allow_extra=("* /repos/**",))

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for path in UNASKED_CONFIRM:
                api.clear()
                result = await client.call_tool("http_request", {"method": "POST", "path": path})
                assert result.is_error is True, (path, text_of(result))
                assert api.count() == 0, (path, api.requests)
            result = await client.call_tool("http_request", {"method": "POST", "path": "/repos/x/Issues"})
            assert "consent could not be asked" in text_of(result), text_of(result)
            api.clear()
            result = await client.call_tool("http_request", {"method": "POST", "path": "/repos/x/labels"})
            assert result.is_error is False and api.count("POST", "/v1/repos/x/labels") == 1

    run(scenario())


# What a terminal, a text field or a bidi renderer would act on: CR, LF, ESC, BEL, C1 (CSI),
# the right-to-left override, a zero-width space.
UNSAFE = ["\r", "\n", "\x1b", "\x07", "\x9b", "\u202e", "\u200b"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_consent_question_holds_no_control_characters_of_the_agent(api, workdir, mode):
    config = write_config(workdir, api)
    asked = []
    forged = "ok\r\x1b[1A\x1b[2KAn agent asks tokenrelay to send GET /status\x07\x9b2J\u202e\u200bcod.exe"

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    async def scenario():
        async with sdk_client(config, workdir, mode=mode, elicit=elicit) as client:
            api.clear()
            result = await client.call_tool("http_request", {"method": "POST", "path": "/repos/o/issues",
                                                             "query": {"x\x9b2J\u202ey": "1"}, "text": forged})
            assert result.is_error is True and api.count() == 0, text_of(result)

    run(scenario())
    assert len(asked) == 1
    message = asked[0]
    assert "POST" in message and "/repos/o/issues" in message and "GET /status" in message, message
    for character in UNSAFE:
        assert character not in message, (character, message)


# --- Redaction and size ---------------------------------------------------------------------


def test_echoed_credentials_never_reach_the_agent(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for profile in ("key", "bearer"):
                for arguments in ({"path": "/echo", "profile": profile},
                                  {"path": "/echo", "method": "POST", "profile": profile,
                                   "json": {"note": "hello"}},
                                  {"path": "/echo-text", "profile": profile}):
                    result = await client.call_tool("http_request", arguments)
                    assert result.is_error is False, text_of(result)
                    everything = json.dumps(result.model_dump(mode="json"))
                    assert KEY not in everything and BEARER not in everything, everything
                    assert "[REDACTED]" in everything
            echoed = (await client.call_tool("http_request", {"path": "/echo"})).structured_content
            assert echoed["json"]["headers"]["X-API-Key"] == "[REDACTED]"
            assert echoed["headers"]["x-echo-key"] == "[REDACTED]"

    run(scenario())


def test_a_compressed_echo_reaches_the_agent_decoded_and_masked(api, workdir):
    # An agent's Accept-Encoding is refused: compressed bytes would hide the echoed credentials.
    # tokenrelay asks for the codings it decodes itself and masks the decoded body; a server that
    # compresses unasked is decoded too, and one whose coding cannot be decoded is withheld.
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for coding in ("gzip", "deflate", "br", "zstd", "identity", "gzip, deflate"):
                api.clear()
                result = await client.call_tool(
                    "http_request", {"path": "/echo", "headers": {"Accept-Encoding": coding}})
                assert result.is_error is True, text_of(result)
                assert "Accept-Encoding" in text_of(result) and api.count() == 0
            for name, value in (("Range", "bytes=10-20"), ("If-Range", "x"), ("accept-encoding", "gzip")):
                result = await client.call_tool("http_request", {"path": "/echo", "headers": {name: value}})
                assert result.is_error is True and api.count() == 0, text_of(result)
            for profile in ("key", "bearer"):
                for path in ("/echo", "/echo-coded/gzip", "/echo-coded/deflate"):
                    result = await client.call_tool("http_request", {"path": path, "profile": profile})
                    assert result.is_error is False, text_of(result)
                    structured = result.structured_content
                    assert "base64" not in structured and "json" in structured, structured
                    assert "gzip" in structured["json"]["headers"]["Accept-Encoding"]
                    assert "content-encoding" not in structured["headers"]
                    everything = json.dumps(result.model_dump(mode="json"))
                    assert KEY not in everything and BEARER not in everything, everything
                    assert "[REDACTED]" in everything
            result = await client.call_tool("http_request", {"path": "/echo-coded/x-unknown"})
            assert result.is_error is True, text_of(result)
            everything = json.dumps(result.model_dump(mode="json"))
            assert KEY not in everything and "base64" not in everything

    run(scenario())


def test_encoded_echoes_of_the_credentials_are_masked(api, workdir):
    config = write_config(workdir, api)

    def base64_bytes(piece):
        piece = piece[: len(piece) - len(piece) % 4 + (len(piece) % 4 if len(piece) % 4 > 1 else 0)]
        return base64.urlsafe_b64decode(piece.replace("+", "-").replace("/", "_") + "=" * (-len(piece) % 4))

    async def scenario():
        async with sdk_client(config, workdir) as client:
            for profile, secret in (("key", KEY), ("bearer", BEARER)):
                result = await client.call_tool("http_request", {"path": "/echo-encoded", "profile": profile})
                assert result.is_error is False, text_of(result)
                received = result.structured_content["json"]
                sent = encoded_forms({"X-API-Key": KEY} if profile == "key" else {"Authorization": "Bearer " + BEARER})
                assert set(received) == set(sent)
                everything = json.dumps(result.model_dump(mode="json"))
                for name, value in sent.items():
                    assert value not in everything, name
                    masked = received[name]
                    assert "[REDACTED]" in masked, (name, masked)
                    for decoded in (urllib.parse.unquote(masked), urllib.parse.unquote_plus(masked)):
                        assert secret not in decoded, (name, masked)
                    if "-b64" in name:
                        # What is left before the mask decodes to the bytes before the secret only.
                        head = urllib.parse.unquote(masked).split("[REDACTED]")[0]
                        assert set(base64_bytes(head)) <= {ord("x")}, (name, masked)

    run(scenario())


def test_long_bodies_are_cut_on_a_character_boundary(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            result = await client.call_tool("http_request", {"path": "/big"})
            assert result.is_error is False
            body = result.structured_content["text"]
            assert result.structured_content["truncated"] is True
            assert body == "é" * 500  # 1000 bytes: the limit falls between two characters
            assert len(body.encode()) <= 1000

    run(scenario())


# --- Confirmation ---------------------------------------------------------------------------


def answering(action):
    async def elicit(context, params):
        assert "POST" in params.message and "/repos/o/issues" in params.message
        return types.ElicitResult(action=action, content={} if action == "accept" else None)
    return elicit


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_confirmation_accept_sends_once_decline_sends_nothing(api, workdir, mode):
    config = write_config(workdir, api)
    call = {"method": "POST", "path": "/repos/o/issues", "json": {"title": "t"}}

    async def scenario():
        api.clear()
        async with sdk_client(config, workdir, mode=mode, elicit=answering("accept")) as client:
            result = await client.call_tool("http_request", call)
            assert result.is_error is False, text_of(result)
            assert api.count("POST", "/v1/repos/o/issues") == 1
        api.clear()
        async with sdk_client(config, workdir, mode=mode, elicit=answering("decline")) as client:
            result = await client.call_tool("http_request", call)
            assert result.is_error is True and "did not accept" in text_of(result)
            assert api.count() == 0
        async with sdk_client(config, workdir, mode=mode) as client:
            result = await client.call_tool("http_request", call)
            assert result.is_error is True and "consent could not be asked" in text_of(result)
            assert api.count() == 0

    run(scenario())


def test_raw_2025_06_18_elicitation_round_trip(api, workdir):
    raw = Raw(write_config(workdir, api), workdir)
    answer = raw.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}})
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    call = {"name": "http_request", "arguments": {"method": "POST", "path": "/repos/o/issues", "text": "hi"}}
    api.clear()
    for id, reply, sent in ((2, {"result": {"action": "accept", "content": {}}}, 1),
                            (3, {"result": {"action": "cancel"}}, 0),
                            (4, {"error": {"code": -32603, "message": "no person here"}}, 0)):
        raw.send({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call})
        asked = raw.read(lambda m: m.get("method") == "elicitation/create")
        assert "mode" not in asked["params"]  # 2025-06-18 has form mode only, unnamed
        assert "POST" in asked["params"]["message"] and asked["params"]["requestedSchema"]["type"] == "object"
        raw.send({"jsonrpc": "2.0", "id": asked["id"], **reply})
        result = raw.read(lambda m, id=id: m.get("id") == id)["result"]
        assert result["isError"] is (sent == 0), result
        assert api.count("POST", "/v1/repos/o/issues") == sent
        api.clear()
    raw.close()


def test_ping_tools_list_and_other_calls_are_answered_while_confirmations_wait(api, workdir):
    """`max_concurrent_requests: 3`: three calls waiting for the person's consent hold no slot;
    ping, tools/list and another call are answered at once, and the questions still work."""
    raw = Raw(write_config(workdir, api, server={"max_concurrent_requests": 3}), workdir)
    try:
        raw.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}})
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        api.clear()
        questions = []
        for id in (2, 3, 4):
            raw.send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "http_request",
                                 "arguments": {"method": "POST", "path": f"/repos/o{id}/issues", "text": "hi"}}})
            questions.append(raw.read(lambda m: m.get("method") == "elicitation/create"))
        assert raw.request(5, "ping")["result"] == {}
        assert [t["name"] for t in raw.request(6, "tools/list")["result"]["tools"]][0] == "http_request"
        called = raw.request(7, "tools/call", {"name": "http_request", "arguments": {"path": "/repos/a"}})
        assert called["result"]["isError"] is False and api.count("GET", "/v1/repos/a") == 1
        # The person answers: the first is sent, the others are not.
        for question, action in zip(questions, ("accept", "decline", "decline")):
            raw.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": action, "content": {}}})
        answers = {}

        def collect(message):
            if message.get("id") in (2, 3, 4) and "method" not in message:
                answers[message["id"]] = message
            return len(answers) == 3

        raw.read(collect)
        assert [answers[id]["result"]["isError"] for id in (2, 3, 4)] == [False, True, True], answers
        assert api.count("POST", "/v1/repos/o2/issues") == 1 and api.count("POST") == 1
    finally:
        raw.close()


def test_a_stateless_confirmation_cannot_be_replayed_for_another_call(api, workdir):
    raw = Raw(write_config(workdir, api), workdir)
    capabilities = {"elicitation": {"form": {}}}
    call = {"name": "http_request", "arguments": {"method": "POST", "path": "/repos/o/issues"}}
    asked = raw.request(1, "tools/call", {"_meta": meta(capabilities), **call})["result"]
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"]["confirm"]["method"] == "elicitation/create"
    state = asked["requestState"]
    api.clear()
    other = {"name": "http_request", "arguments": {"method": "POST", "path": "/repos/other/issues"}}
    answer = {"inputResponses": {"confirm": {"action": "accept", "content": {}}}, "requestState": state}
    refused = raw.request(2, "tools/call", {"_meta": meta(capabilities), **other, **answer})["result"]
    assert refused["isError"] is True and api.count() == 0
    # The state was spent by that attempt: the original call must ask again.
    again = raw.request(3, "tools/call", {"_meta": meta(capabilities), **call, **answer})["result"]
    assert again["isError"] is True and api.count() == 0
    raw.close()


# --- Logins, reload, canaries ---------------------------------------------------------------


def test_a_profile_needing_a_login_answers_at_once_and_the_server_keeps_serving(api, workdir):
    config = write_config(workdir, api)

    async def scenario():
        async with sdk_client(config, workdir) as client:
            start = time.monotonic()
            result = await client.call_tool("http_request", {"environment": "login", "path": "/repos/a"})
            assert time.monotonic() - start < 2
            assert result.is_error is True
            assert "tokenrelay login --env login --profile me" in text_of(result)
            result = await client.call_tool("http_request", {"path": "/repos/a"})
            assert result.is_error is False

    run(scenario())


def test_reload_rereads_rules_and_announces_the_change(api, workdir):
    config = write_config(workdir, api)
    raw = Raw(config, workdir)
    raw.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "http_request", "arguments": {"path": "/users/me"}}
    assert raw.request(2, "tools/call", call)["result"]["isError"] is True
    write_config(workdir, api, allow_extra=("GET /users/*",))
    raw.process.send_signal(signal.SIGHUP)
    raw.read(lambda m: m.get("method") == "notifications/tools/list_changed")
    api.clear()
    assert raw.request(3, "tools/call", call)["result"]["isError"] is False
    assert api.count("GET", "/v1/users/me") == 1
    raw.close()


def test_env_option_exposes_that_environment_alone(api, workdir):
    raw = Raw(write_config(workdir, api), workdir, args=("--env", "login"))
    raw.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    tools = raw.request(2, "tools/list")["result"]["tools"]
    assert tools[0]["inputSchema"]["properties"]["environment"]["enum"] == ["login"]
    api.clear()
    refused = raw.request(3, "tools/call", {"name": "http_request",
                                            "arguments": {"environment": "api", "path": "/repos/a"}})["result"]
    assert refused["isError"] is True and "not exposed" in refused["content"][0]["text"] and api.count() == 0
    raw.close()


def test_cancelled_notification_cancels_the_request_and_the_server_keeps_serving(api, workdir):
    raw = Raw(write_config(workdir, api), workdir)
    raw.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    api.slow_arrived.clear()
    api.slow_release.clear()
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "http_request", "arguments": {"path": "/slow"}}})
    assert api.slow_arrived.wait(15)
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    # MCP: a cancelled request is not answered. The next answer is the ping's, and the slow
    # request is not answered even once the API would have answered it.
    assert raw.request(3, "ping")["result"] == {}
    api.slow_release.set()
    assert raw.request(4, "tools/call", {"name": "http_request", "arguments": {"path": "/repos/a"}})["result"]
    stdout, _ = raw.close()
    assert not any(json.loads(line).get("id") == 2 for line in stdout.splitlines() if line.strip())


def test_no_secret_on_stdout_or_stderr_at_trace(api, workdir):
    raw = Raw(write_config(workdir, api), workdir, args=("--log-level", "trace"))
    raw.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    for index, arguments in enumerate([{"path": "/echo"}, {"path": "/echo", "profile": "bearer"},
                                       {"path": "/echo-text", "query": {"k": KEY}},
                                       {"path": "/repos/a", "headers": {"X-Note": BEARER}},
                                       {"path": "/repos/a", "headers": {"Authorization": KEY}},
                                       {"environment": "login", "path": "/a"}]):
        raw.request(10 + index, "tools/call", {"name": "http_request", "arguments": arguments})
    stdout, stderr = raw.close()
    assert b"http_request GET http://127.0.0.1" in stderr  # the audit line
    for secret in (KEY, BEARER):
        assert secret.encode() not in stdout
        assert secret.encode() not in stderr


def interop_stack():
    path = os.environ.get("TOKENRELAY_STACK_ENV")
    if not path:
        pytest.skip("TOKENRELAY_STACK_ENV is not set (no interop stack)")
    out = subprocess.run(["bash", "-c", f"set -a; . {shlex.quote(path)}; env -0"], check=True,
                         capture_output=True).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def test_a_login_through_url_elicitation_completes_in_the_background(workdir):
    stack = interop_stack()
    if not stack.get("AS_URL"):
        pytest.skip("the interop stack has no authorization server URL for a person's login")
    api = API()
    config = write_config(workdir, api, stack=stack)
    whoami = stack.get("STACK_PATH", "/whoami")
    asked = []
    arrived = asyncio.Event()

    async def elicit(context, params):
        asked.append(params)
        arrived.set()
        return types.ElicitResult(action="accept")

    async def scenario():
        async with sdk_client(config, workdir, stack=stack, elicit=elicit) as client:
            call = {"environment": "stack", "profile": "tv", "path": whoami}
            start = time.monotonic()
            result = await client.call_tool("http_request", call)
            assert time.monotonic() - start < 2  # a login never blocks a call
            assert result.is_error is True and "asked your client to open the login page" in text_of(result)
            await asyncio.wait_for(arrived.wait(), 10)
            assert asked[0].mode == "url" and asked[0].url.startswith(stack["AS_URL"].rstrip("/"))
            code = re.search(r"code ([A-Za-z0-9-]+)", asked[0].message).group(1)
            approve = ROOT / "clients" / "neovim" / "test" / "approve_device.py"
            subprocess.run([sys.executable, str(approve), stack["AS_URL"].rstrip("/"), code], check=True, timeout=60)
            # The login finishes in the background (its next poll of the token endpoint); a
            # retry then goes through. Bounded: the device flow's interval is a few seconds.
            deadline = time.monotonic() + 60
            while True:
                result = await client.call_tool("http_request", call)
                if not result.is_error or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert result.is_error is False, text_of(result)
            assert result.structured_content["status"] == 200
            assert len(asked) == 1  # retries while the person logged in did not ask again

    try:
        run(scenario())
    finally:
        api.server.shutdown()


def test_a_stateless_login_asks_through_an_input_required_url_elicitation(workdir):
    """2026-07-28: no server-initiated request; the login URL is an input-required result, the
    login completes in the background, and the client's retry with the person's answer goes through."""
    stack = interop_stack()
    if not stack.get("AS_URL"):
        pytest.skip("the interop stack has no authorization server URL for a person's login")
    api = API()
    raw = Raw(write_config(workdir, api, stack=stack), workdir, stack=stack)
    try:
        capabilities = {"elicitation": {"url": {}}}
        call = {"name": "http_request",
                "arguments": {"environment": "stack", "profile": "tv", "path": stack.get("STACK_PATH", "/whoami")}}
        start = time.monotonic()
        asked = raw.request(1, "tools/call", {"_meta": meta(capabilities), **call})["result"]
        assert time.monotonic() - start < 2  # a login never blocks a call
        assert asked["resultType"] == "input_required", asked
        login = asked["inputRequests"]["login"]
        assert login["method"] == "elicitation/create" and login["params"]["mode"] == "url"
        assert login["params"]["url"].startswith(stack["AS_URL"].rstrip("/"))
        answer = {"inputResponses": {"login": {"action": "accept"}}, "requestState": asked["requestState"]}
        # Answered before the person logged in: told so, not asked again.
        early = raw.request(2, "tools/call", {"_meta": meta(capabilities), **call, **answer})["result"]
        assert early["resultType"] == "complete" and early["isError"] is True
        code = re.search(r"code ([A-Za-z0-9-]+)", login["params"]["message"]).group(1)
        approve = ROOT / "clients" / "neovim" / "test" / "approve_device.py"
        subprocess.run([sys.executable, str(approve), stack["AS_URL"].rstrip("/"), code], check=True, timeout=60)
        # The login finishes in the background (its next poll of the token endpoint); the server
        # says so in its log, and the client's retry then goes through.
        raw.wait_stderr("login of stack/tv completed")
        id = 3
        result = raw.request(id, "tools/call", {"_meta": meta(capabilities), **call, **answer})["result"]
        assert result["isError"] is False, result
        assert result["structuredContent"]["status"] == 200
        listed = raw.request(id + 1, "tools/call", {"_meta": meta(), "name": "list_environments",
                                                      "arguments": {}})["result"]
        counts = listed["structuredContent"]["toolCalls"]
        assert counts["awaiting"] == 1 and counts["sent"] == 1 and counts["failed"] >= 1
    finally:
        raw.close()
        api.server.shutdown()


def test_oauth_client_credentials_against_the_interop_stack(workdir):
    stack = interop_stack()
    api = API()
    config = write_config(workdir, api, stack=stack)
    secret = stack.get("CLIENT_SECRET", "svc-secret")
    whoami = stack.get("STACK_PATH", "/whoami")

    async def scenario():
        async with sdk_client(config, workdir, stack=stack) as client:
            result = await client.call_tool("http_request", {"environment": "stack", "path": whoami})
            assert result.is_error is False, text_of(result)
            assert result.structured_content["status"] == 200, text_of(result)
            assert secret not in json.dumps(result.model_dump(mode="json"))
            listing = await client.call_tool("list_environments", {})
            stack_env = [e for e in listing.structured_content["environments"] if e["name"] == "stack"][0]
            assert stack_env["profiles"][0]["session"] == "valid"

    try:
        run(scenario())
    finally:
        api.server.shutdown()
