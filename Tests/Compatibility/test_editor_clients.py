"""Protocol-compatibility suite: the frames editors' own JSON-RPC clients send, through the real
tokenrelay binary (SPEC §4.1, §4.2).

- Neovim 0.7.2 (`vim.lsp.start_client`) and eglot 1.9 on Emacs 28.2's `jsonrpc.el`: the exact
  bytes the real editors wrote, captured by capture/capture.sh into frames/*.lsp. Replaying
  them changes one thing: `processId` becomes this test's pid (the captured editor is gone, and
  tokenrelay exits when the process named there dies).
- vscode-languageclient: its package cannot be installed here, so its `initialize` is built
  from the LSP specification's `InitializeParams` (every member, the way vscode-languageclient
  fills them) and its `shutdown`/`exit` as vscode-jsonrpc writes a request with no params.
- pygls 2 (PyPI): its real `LanguageClient` and `JsonRPCClient` run against the binary, and what
  they wrote is recorded on the way in.

Each replay checks: the `initialize` result, no reply to any notification, `shutdown` answered
with `result: null`, and exit code 0 after `exit`. Editors frame with LSP Content-Length
headers; the same messages are also replayed as NDJSON.
"""
from __future__ import annotations

import asyncio
import atexit
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
from typing import Any

import pytest

HERE = pathlib.Path(__file__).resolve().parent
# The binaries run here keep whatever session state they make in a private directory.
STATE_HOME = tempfile.mkdtemp(prefix="tokenrelay-compat-state-")
atexit.register(shutil.rmtree, STATE_HOME, ignore_errors=True)
ROOT = HERE.parent.parent
FRAMES = HERE / "frames"


def binary() -> str:
    path = os.environ.get("TOKENRELAY_BIN") or str(ROOT / ".build" / "debug" / "tokenrelay")
    if not os.access(path, os.X_OK):
        pytest.fail(f"no tokenrelay binary at {path} (swift build first, or set TOKENRELAY_BIN)")
    return path


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOKENRELAY_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(HERE / "no-config")  # no config: serve runs with no environments
    env["XDG_STATE_HOME"] = STATE_HOME  # never the user's session store
    return env


def split_lsp(data: bytes) -> list[tuple[bytes, bytes]]:
    """(header, body) per Content-Length frame; fails unless the bytes are exactly frames."""
    frames: list[tuple[bytes, bytes]] = []
    rest = data
    while rest:
        header, sep, rest = rest.partition(b"\r\n\r\n")
        assert sep, f"unterminated header: {header[:80]!r}"
        fields = dict(line.split(b": ", 1) for line in header.split(b"\r\n"))
        length = int(fields[b"Content-Length"])
        assert len(rest) >= length, "truncated body"
        frames.append((header, rest[:length]))
        rest = rest[length:]
    return frames


def lsp(message: dict[str, Any] | bytes) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Session:
    """The binary under test, driven as an editor drives it: a request is followed by the next
    message only once it is answered (editors wait for `initialize` before `initialized`, and for
    `shutdown` before `exit`); notifications go out at once. stdin stays open until the server
    exits on its own, so the exit code is the one `exit` decides, not stdin EOF's."""

    def __init__(self, framing: str) -> None:
        self.framing = framing
        self.process = subprocess.Popen(
            [binary(), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=environment())
        self.answers: list[dict[str, Any]] = []
        self.stdout = bytearray()
        self.stderr = b""
        self.changed = threading.Condition()
        self.readers = [threading.Thread(target=self._read_stdout), threading.Thread(target=self._read_stderr)]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read1(65536):
            with self.changed:
                self.stdout += chunk
                self.answers = self._parse(bytes(self.stdout))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def _parse(self, data: bytes) -> list[dict[str, Any]]:
        if self.framing == "ndjson":
            return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]
        complete = data
        while True:  # drop a frame still arriving
            try:
                return [json.loads(body) for _, body in split_lsp(complete)]
            except (AssertionError, ValueError, KeyError):
                cut = complete.rfind(b"Content-Length:")
                if cut <= 0:
                    return []
                complete = complete[:cut]

    def send(self, body: bytes) -> None:
        assert self.process.stdin is not None
        frame = lsp(body) if self.framing == "lsp" else json.dumps(json.loads(body), separators=(",", ":")).encode() + b"\n"
        self.process.stdin.write(frame)
        self.process.stdin.flush()
        message = json.loads(body)
        if "id" in message:  # wait for its answer (a safety timeout only)
            with self.changed:
                answered = self.changed.wait_for(
                    lambda: any(a.get("id") == message["id"] for a in self.answers) or self.process.poll() is not None,
                    timeout=60)
            assert answered, f"no answer to {message.get('method')}"

    def finish(self) -> subprocess.CompletedProcess[bytes]:
        assert self.process.stdin is not None
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            self.process.stdin.close()
            for reader in self.readers:
                reader.join()
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, bytes(self.stdout), self.stderr)


def run(bodies: list[bytes], framing: str = "lsp") -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[bytes]]:
    session = Session(framing)
    for body in bodies:
        session.send(body)
    completed = session.finish()
    return session._parse(completed.stdout), completed


def with_our_pid(body: bytes) -> bytes:
    message = json.loads(body)
    if message.get("method") == "initialize" and isinstance(message.get("params"), dict):
        if message["params"].get("processId") is not None:
            message["params"]["processId"] = os.getpid()
        return json.dumps(message).encode()
    return body


def captured(name: str) -> list[bytes]:
    """The bodies of a capture, each exactly as the editor framed it (Content-Length checked)."""
    return [body for _, body in split_lsp((FRAMES / name).read_bytes())]


def vscode_languageclient() -> list[bytes]:
    """What vscode-languageclient sends, from the LSP 3.17 specification's InitializeParams."""
    folder = {"uri": "file:///home/user/project", "name": "project"}
    initialize = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "processId": os.getpid(),
            "clientInfo": {"name": "Visual Studio Code", "version": "1.95.0"},
            "locale": "en",
            "rootPath": "/home/user/project",
            "rootUri": folder["uri"],
            "capabilities": {
                "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True},
                              "configuration": True, "workspaceFolders": True},
                "textDocument": {"synchronization": {"dynamicRegistration": True, "didSave": True}},
                "window": {"workDoneProgress": True},
                "general": {"positionEncodings": ["utf-16"], "markdown": {"parser": "marked", "version": "1.1.0"}},
            },
            "initializationOptions": None,
            "trace": "off",
            "workspaceFolders": [folder],
            "workDoneToken": "5b8c0f4e-3b8e-4a53-a0f4-2c6f6c9e1d0a",
        },
    }
    return [json.dumps(m).encode() for m in (
        initialize,
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}},
        {"jsonrpc": "2.0", "id": 1, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    )]


CLIENTS = {
    "neovim-0.7.2": lambda: captured("neovim-0.7.2.lsp"),
    "eglot-1.9": lambda: captured("eglot-1.9.lsp"),
    "vscode-languageclient": vscode_languageclient,
}


def check_session(bodies: list[bytes], answers: list[dict[str, Any]], completed: subprocess.CompletedProcess[bytes]) -> None:
    sent = [json.loads(body) for body in bodies]
    requests = [m for m in sent if "id" in m]
    assert [m["method"] for m in sent if "id" not in m][-1] == "exit"
    # No reply to any notification: exactly one answer per request, with its id (requests run
    # concurrently, so the answers come in the order they finish).
    assert sorted(json.dumps(a.get("id")) for a in answers) == sorted(json.dumps(m["id"]) for m in requests), \
        completed.stdout[:2000]
    answer_by_id = {json.dumps(a.get("id")): a for a in answers}
    by_method = {m["method"]: answer_by_id[json.dumps(m["id"])] for m in requests}
    init = by_method["initialize"]["result"]
    assert init["serverInfo"]["name"] == "tokenrelay"
    assert init["protocolVersion"] == "2026-12-01"
    assert isinstance(init["environments"], list) and "methods" in init["capabilities"]
    shutdown = by_method["shutdown"]
    assert "result" in shutdown and shutdown["result"] is None and "error" not in shutdown
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_lsp_framed_session_is_answered_and_exits_zero(client: str) -> None:
    bodies = [with_our_pid(b) for b in CLIENTS[client]()]
    answers, completed = run(bodies, "lsp")
    assert completed.stdout.startswith(b"Content-Length: "), "answers use the peer's framing"
    check_session(bodies, answers, completed)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_the_same_messages_as_ndjson_are_answered_and_exit_zero(client: str) -> None:
    bodies = [with_our_pid(b) for b in CLIENTS[client]()]
    answers, completed = run(bodies, "ndjson")
    check_session(bodies, answers, completed)


def test_captures_are_what_the_editors_send() -> None:
    """The captured bytes are whole frames, and carry what made the server refuse them before."""
    nvim = [json.loads(b) for b in captured("neovim-0.7.2.lsp")]
    assert [m["method"] for m in nvim] == ["initialize", "initialized", "shutdown", "exit"]
    assert {"rootPath", "rootUri", "workspaceFolders", "capabilities", "clientInfo", "trace"} <= set(nvim[0]["params"])
    assert "params" not in nvim[2] and "params" not in nvim[3], "Lua drops a nil params"
    eglot = [json.loads(b) for b in captured("eglot-1.9.lsp")]
    assert [m["method"] for m in eglot] == [
        "initialize", "initialized", "workspace/didChangeConfiguration", "shutdown", "exit"]
    assert eglot[3]["params"] is None and eglot[4]["params"] is None, "jsonrpc.el sends null for no params"


def test_exit_without_shutdown_is_exit_code_one() -> None:
    bodies = captured("neovim-0.7.2.lsp")
    without_shutdown = [with_our_pid(b) for b in bodies if json.loads(b).get("method") != "shutdown"]
    answers, completed = run(without_shutdown, "lsp")
    assert completed.returncode == 1
    assert [a.get("id") for a in answers] == [1], "only initialize is answered"


# --- pygls, live -----------------------------------------------------------------------------

def recording_command(record: pathlib.Path) -> tuple[str, list[str]]:
    """A command that records its stdin into `record` and runs the binary on it (exit code kept)."""
    return "bash", ["-c", 'exec "$1" serve < <(tee "$0" 2>/dev/null)', str(record), binary()]


def test_pygls_language_client_session(tmp_path: pathlib.Path) -> None:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    record = tmp_path / "pygls.lsp"

    async def session() -> tuple[Any, Any, int | None]:
        client = LanguageClient("tokenrelay-compat", "1.0")
        command, args = recording_command(record)
        await client.start_io(command, *args, env=environment())
        result = await asyncio.wait_for(client.initialize_async(types.InitializeParams(
            process_id=os.getpid(), root_uri=tmp_path.as_uri(),
            capabilities=types.ClientCapabilities(), client_info=types.ClientInfo(name="pygls", version="2"),
            trace=types.TraceValue.Off, workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="t")])), 30)
        client.initialized(types.InitializedParams())
        shutdown = await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
        server = client._server
        assert server is not None
        code = await asyncio.wait_for(server.wait(), 30)
        await client.stop()
        return result, shutdown, code

    result, shutdown, code = asyncio.run(session())
    assert result.server_info.name == "tokenrelay"
    assert shutdown is None
    assert code == 0
    sent = [json.loads(body) for _, body in split_lsp(record.read_bytes())]
    assert [m["method"] for m in sent] == ["initialize", "initialized", "shutdown", "exit"]
    assert sent[2].get("params") is None and sent[3].get("params") is None, sent
    assert b"Content-Type: application/vscode-jsonrpc" in record.read_bytes(), "pygls sends Content-Type too"


def test_pygls_jsonrpc_client_generic_requests(tmp_path: pathlib.Path) -> None:
    from pygls.client import JsonRPCClient

    record = tmp_path / "jsonrpc.lsp"

    async def session() -> tuple[Any, Any, int | None]:
        client = JsonRPCClient()
        command, args = recording_command(record)
        await client.start_io(command, *args, env=environment())
        ping = await asyncio.wait_for(client.protocol.send_request_async("ping", None), 30)
        shutdown = await asyncio.wait_for(client.protocol.send_request_async("shutdown", None), 30)
        client.protocol.notify("exit", None)
        server = client._server
        assert server is not None
        code = await asyncio.wait_for(server.wait(), 30)
        await client.stop()
        return ping, shutdown, code

    ping, shutdown, code = asyncio.run(session())
    assert ping is not None and shutdown is None and code == 0
    sent = [json.loads(body) for _, body in split_lsp(record.read_bytes())]
    assert all("params" in m and m["params"] is None for m in sent), "JsonRPCClient sends null for no params"
