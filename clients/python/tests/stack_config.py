"""A tokenrelay config for the interop stack, written from the stack's variables.

If the stack file sets ``TOKENRELAY_CONFIG`` that file is used as is. Otherwise one is
written with environment ``stack`` (base ``RS_URL``, profile ``service`` with
``CLIENT_ID``/``CLIENT_SECRET`` at ``ISSUER``/``TOKEN_URL``, profile ``bad`` with a wrong
secret, profile ``tv``: a device-code login as the public client ``tv``), its own session store in
the directory, and environment ``closed`` (a loopback port nothing listens on). Paths on the
resource server: ``STACK_PATH`` (default ``/whoami``) and ``STACK_SSE_PATH`` (default ``/events``).
"""

import json
import os


def write_config(stack, directory):
    if stack.get("TOKENRELAY_CONFIG"):
        return stack["TOKENRELAY_CONFIG"]
    issuer = stack.get("ISSUER") or stack.get("AS_URL")
    endpoint = {"token_url": stack["TOKEN_URL"]} if stack.get("TOKEN_URL") else {}
    client = {
        "type": "client_credentials",
        "issuer": issuer,
        "client_id": stack.get("CLIENT_ID", "svc"),
        **endpoint,
    }
    config = {
        "version": 1,
        "default_environment": "stack",
        "environments": {
            "stack": {
                "base_url": stack["RS_URL"],
                "default_profile": "service",
                "profiles": {
                    "service": {**client, "client_secret": stack.get("CLIENT_SECRET", "svc-secret")},
                    "bad": {**client, "client_secret": "definitely-wrong"},
                },
            },
            "closed": {"base_url": "http://127.0.0.1:9", "profiles": {"none": {"type": "bearer", "token": "x"}}},
        },
        # Sessions of this config only (not the user's default store): a login here is not
        # seen by another test's config, and nothing is left behind.
        "store": {"type": "sqlite", "path": os.path.join(str(directory), "state", "sessions.db")},
    }
    if stack.get("AS_URL"):
        # A person's login: device code as the AS's public client ``tv`` (approve_device.py
        # in clients/neovim/test plays the person).
        config["environments"]["stack"]["profiles"]["tv"] = {
            "type": "device_code",
            "issuer": issuer,
            **endpoint,
            "device_authorization_url": stack["AS_URL"].rstrip("/") + "/o/device-authorization/",
            "client_id": "tv",
        }
    path = os.path.join(str(directory), "stack-config.yaml")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)  # JSON is YAML
    return path


def paths(stack):
    return stack.get("STACK_PATH", "/whoami"), stack.get("STACK_SSE_PATH", "/events")


if __name__ == "__main__":
    # python3 stack_config.py DIR: writes the config for $TOKENRELAY_STACK_ENV into DIR,
    # prints its path and the two paths (used by the shell recipes' tests).
    import subprocess
    import sys

    out = subprocess.run(["bash", "-c", 'set -a; . "$1"; env -0', "bash", os.environ["TOKENRELAY_STACK_ENV"]],
                         check=True, capture_output=True).stdout
    variables = dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)
    print(write_config(variables, sys.argv[1]))
    print("\n".join(paths(variables)))
