"""The official MCP conformance suite's client scenarios against `tokenrelay mcp-proxy` (SPEC §9.8).

Each scenario runs the bundled suite (`../shared/conformance/conformance-0.1.16.mjs`, Node only):
it starts its own MCP server (and authorization server) on loopback and runs `host.py` (the
editor and the person) against it; the scenario passes with no FAILURE and no WARNING among the
suite's checks. Without the bundle (the project never needs ../shared to build or run), or
without node, the module is skipped, saying so.

A scenario the current code cannot pass yet is marked xfail(strict=True) with the reason: CI
stays green, and a pass is noticed (it then fails as XPASS, and its mark is to be removed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(
    os.environ.get("TOKENRELAY_CONFORMANCE_SUITE")
    or ROOT.parent / "shared" / "conformance" / "conformance-0.1.16.mjs"
)
HOST = Path(__file__).parent / "host.py"

if not SUITE.exists():
    pytest.skip(
        f"the MCP conformance suite is not at {SUITE} (../shared/conformance); skipped",
        allow_module_level=True,
    )
if shutil.which("node") is None:
    pytest.skip(
        "node is not installed: the conformance suite needs it", allow_module_level=True
    )


def xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


SCENARIOS = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/cross-app-access-complete-flow",
]


def binary() -> str:
    path = os.environ.get("TOKENRELAY_BIN") or str(
        ROOT / ".build" / "debug" / "tokenrelay"
    )
    if not os.path.exists(path):
        pytest.fail(
            f"no tokenrelay binary at {path} (swift build first, or set TOKENRELAY_BIN)"
        )
    return path


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario(scenario: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tokenrelay-conformance-") as directory:
        work = Path(directory)
        output = work / "results"
        hosts = work / "hosts"
        hosts.mkdir()
        env = {
            **os.environ,
            "TOKENRELAY_BIN": binary(),
            "TOKENRELAY_CONFORMANCE_DIR": str(hosts),
            # The suite and the host: no user state of their own either.
            "HOME": str(work),
            "XDG_STATE_HOME": str(work / "state"),
            "XDG_CONFIG_HOME": str(work / "config"),
            "XDG_CACHE_HOME": str(work / "cache"),
        }
        run = subprocess.run(
            [
                "node",
                str(SUITE),
                "client",
                "--command",
                f"{sys.executable} {HOST}",
                "--scenario",
                scenario,
                # A hang net for a loaded machine, not a timing assertion.
                "--timeout",
                "240000",
                "-o",
                str(output),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        found = sorted(output.glob("**/checks.json"))
        assert found, f"no checks.json (exit {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
        checks = json.loads(found[0].read_text())
        counts = {
            status: sum(1 for c in checks if c["status"] == status)
            for status in ("SUCCESS", "FAILURE", "WARNING", "INFO")
        }
        print(f"{scenario}: {counts}")
        bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
        # The suite's own verdict also counts a client that exited with an error where the
        # scenario does not expect one, and a time-out (a scenario whose server saw nothing has
        # no checks at all).
        if bad or run.returncode != 0:
            shown = "\n".join(
                f"  {c['status']} {c['id']}: {c.get('description', '')} {c.get('errorMessage') or ''}"
                for c in bad
            )
            stderr = found[0].parent / "stderr.txt"
            tail = stderr.read_text()[-3000:] if stderr.exists() else run.stdout[-3000:]
            pytest.fail(
                f"{scenario}: the suite says FAILED (exit {run.returncode}); {len(bad)} failing checks of {len(checks)}:\n{shown}\n--- client stderr (tail):\n{tail}"
            )
