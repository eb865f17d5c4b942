"""Shared fixtures: the package from ../src without installing, the fake server, the real
binary ($TOKENRELAY_BIN or ../../.build/debug/tokenrelay) and the interop stack
($TOKENRELAY_STACK_ENV, a shell-sourceable file; tests needing it are skipped without it)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

FAKE = HERE / "fake_tokenrelay.py"
REPO = HERE.parent.parent.parent


def real_binary_path():
    candidate = os.environ.get("TOKENRELAY_BIN") or str(REPO / ".build" / "debug" / "tokenrelay")
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


@pytest.fixture(autouse=True)
def private_state_home(tmp_path_factory, monkeypatch):
    """Every tokenrelay a test starts keeps its default session store in a fresh directory,
    never in the user's ~/.local/state (tests that share a store within a test still do)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture
def fake_bin():
    return str(FAKE)


@pytest.fixture
def real_bin():
    path = real_binary_path()
    if path is None:
        pytest.skip("tokenrelay binary not built (swift build) and $TOKENRELAY_BIN unset")
    return path


@pytest.fixture
def test_environ():
    environ = dict(os.environ)
    environ["TOKENRELAY_ENABLE_TEST_METHODS"] = "1"
    return environ


@pytest.fixture(scope="session")
def stack():
    """The interop stack's variables (AS_URL, RS_URL, ISSUER, TOKEN_URL, ...)."""
    path = os.environ.get("TOKENRELAY_STACK_ENV")
    if not path:
        pytest.skip("TOKENRELAY_STACK_ENV is not set (no interop stack)")
    out = subprocess.run(["bash", "-c", f"set -a; . {shlex.quote(path)}; env -0"], check=True, capture_output=True).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def pid_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still "exists"; it must also be reaped by the client.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
