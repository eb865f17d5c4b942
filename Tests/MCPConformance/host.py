"""The editor and the person for the MCP conformance suite's client scenarios (SPEC §9.8).

The suite runs `CMD <server-url>` for each client scenario. This program is that CMD for
`tokenrelay mcp-proxy`: it spawns the proxy (the binary at $TOKENRELAY_BIN) with a private HOME
and state directory, speaks MCP to it on stdio through the official MCP Python SDK's client (the
client an editor embeds, so the proxy is driven exactly as one would drive it), and plays the
person: the login URL the proxy prints on stderr is fetched, following redirects, so the suite's
authorization server sends the code to tokenrelay's loopback listener.

Where a scenario hands out credentials (`MCP_CONFORMANCE_CONTEXT`), the proxy runs with a config
file written here and `--env`. Exit status 0 when the tool calls succeeded; the suite judges the
rest from what its servers saw.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import ElicitResult

LOGIN = re.compile(r"open (https?://\S+)")


def log(message: str) -> None:
    print(f"host: {message}", file=sys.stderr, flush=True)


def person(url: str) -> None:
    """Opens the login URL: the authorization server approves at once and redirects to
    tokenrelay's loopback listener, which urllib follows."""
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
        log("login page followed to its end")
    except Exception as error:  # the scenario's checks say what went wrong
        log(f"the login page failed: {error}")


def watch_stderr(read_fd: int) -> None:
    """Echoes the proxy's stderr and plays the person for each login URL on it."""
    with os.fdopen(read_fd, "r", errors="replace") as stream:
        for line in stream:
            sys.stderr.write(line)
            sys.stderr.flush()
            match = LOGIN.search(line)
            if match:
                threading.Thread(
                    target=person, args=(match.group(1),), daemon=True
                ).start()


def default_arguments(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Arguments for a tool from its input schema (required properties, plain values)."""
    properties = (schema or {}).get("properties") or {}
    values = {"integer": 1, "number": 1, "boolean": True, "string": "test"}
    return {
        name: values.get(spec.get("type"), "test")
        for name, spec in properties.items()
        if isinstance(spec, dict)
    }


async def elicit(_context: Any, params: Any) -> ElicitResult:
    """Accepts with the requested schema's defaults (what an editor's form would submit)."""
    schema = getattr(params, "requested_schema", None) or getattr(
        params, "requestedSchema", {}
    )
    content = {
        name: spec["default"]
        for name, spec in (schema.get("properties") or {}).items()
        if isinstance(spec, dict) and "default" in spec
    }
    return ElicitResult(action="accept", content=content)


def config_for(
    scenario: str, url: str, context: dict[str, Any], directory: Path
) -> Path | None:
    """The config file of a scenario that hands out credentials; None for the zero-config proxy."""
    profile: dict[str, Any] = {"discover": True}
    if scenario == "auth/basic-cimd":
        # The person configured the client's metadata document (SPEC §9.4); the scenario's
        # server accepts this URL as the client id.
        profile["client_metadata_url"] = (
            "https://conformance-test.local/client-metadata.json"
        )
    elif "client_id" in context:
        profile["client_id"] = context["client_id"]
    else:
        return None
    if scenario.startswith("auth/client-credentials"):
        profile["type"] = "client_credentials"
    else:
        profile["type"] = "authorization_code"
        profile["redirect"] = {"port": 0}
    if "private_key_pem" in context:
        key = directory / "client.key"
        key.write_text(context["private_key_pem"])
        key.chmod(0o600)
        profile["client_auth"] = "private_key_jwt"
        profile["client_key"] = {"file": str(key)}
        profile["client_key_alg"] = context.get("signing_algorithm", "ES256")
        # SEP-1046: the assertion's audience is the authorization server's issuer.
        profile["client_assertion_audience"] = "issuer"
    elif "client_secret" in context:
        profile["client_secret"] = {"env": "CONFORMANCE_CLIENT_SECRET"}
    profiles: dict[str, Any] = {"mcp": profile}
    if "idp_id_token" in context:
        # Enterprise-managed authorization (SPEC §9.9): the MCP server's authorization server
        # takes an ID-JAG that the person's IdP issues for their ID token. The scenario hands out
        # the ID token of a login that already happened, so a secret source stands in for the
        # person's IdP profile (`subject: { profile, token: id_token }`).
        profile["type"] = "jwt_bearer"
        profile.pop("redirect", None)
        profile["client_auth"] = "client_secret_basic"
        profile["assertion"] = {"profile": "idp"}
        profiles["idp"] = {
            "type": "token_exchange",
            "token_url": context["idp_token_endpoint"],
            "client_id": context["idp_client_id"],
            "client_auth": "none",
            "subject_token": {"env": "CONFORMANCE_IDP_ID_TOKEN"},
            "subject_token_type": "id_token",
            "requested_token_type": "id-jag",
        }
    config = {
        "version": 1,
        "default_environment": "conformance",
        "environments": {
            "conformance": {
                "base_url": url,
                "default_profile": "mcp",
                "profiles": profiles,
            }
        },
    }
    path = directory / "config.json"
    path.write_text(json.dumps(config))
    return path


async def drive(url: str, directory: Path) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    home = directory / "home"
    state = home / "state"
    state.mkdir(parents=True, mode=0o700)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_STATE_HOME": str(state),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    if "client_secret" in context:
        env["CONFORMANCE_CLIENT_SECRET"] = context["client_secret"]
    if "idp_id_token" in context:
        env["CONFORMANCE_IDP_ID_TOKEN"] = context["idp_id_token"]
    config = config_for(scenario, url, context, directory)
    args = ["mcp-proxy", "--log-level", "debug"]
    args += ["--config", str(config), "--env", "conformance"] if config else [url]
    binary = os.environ.get("TOKENRELAY_BIN", "tokenrelay")
    read_fd, write_fd = os.pipe()
    watcher = threading.Thread(target=watch_stderr, args=(read_fd,), daemon=True)
    watcher.start()
    failures = 0
    with os.fdopen(write_fd, "w") as errlog:
        params = StdioServerParameters(command=binary, args=args, env=env)
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(
                read, write, elicitation_callback=elicit
            ) as session:
                init = await session.initialize()
                log(f"initialized: {init.server_info.name} ({init.protocol_version})")
                listed = await session.list_tools()
                for tool in listed.tools:
                    result = await session.call_tool(
                        tool.name, default_arguments(tool.input_schema)
                    )
                    texts = [getattr(c, "text", "") for c in result.content]
                    log(f"{tool.name}: {'error ' if result.is_error else ''}{texts}")
                    failures += 1 if result.is_error else 0
    watcher.join(timeout=5)
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: host.py SERVER_URL", file=sys.stderr)
        return 2
    given = os.environ.get("TOKENRELAY_CONFORMANCE_DIR")
    if given:
        directory = Path(tempfile.mkdtemp(prefix="host-", dir=given))
        return anyio.run(drive, sys.argv[1], directory)
    with tempfile.TemporaryDirectory(prefix="tokenrelay-conformance-") as directory:
        return anyio.run(drive, sys.argv[1], Path(directory))


if __name__ == "__main__":
    sys.exit(main())
