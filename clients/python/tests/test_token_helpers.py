"""``logout`` and ``token_get`` against the interop stack."""

import asyncio
import json

import pytest
from stack_config import paths, write_config

import tokenrelay


def _config(stack, tmp_path):
    path = write_config(stack, tmp_path)
    with open(path) as f:
        config = json.load(f)
    profiles = config["environments"]["stack"]["profiles"]
    profiles["exposed"] = {**profiles["service"], "expose_token": True}
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def test_token_get_and_logout(stack, real_bin, tmp_path):
    with tokenrelay.Relay(config=_config(stack, tmp_path), binary=real_bin) as relay:
        token = relay.token_get("stack", "exposed")
        assert isinstance(token["access_token"], str) and token["access_token"]
        assert token["token_type"].lower() == "bearer"
        with pytest.raises(tokenrelay.NotSupported):
            relay.token_get("stack", "service")
        assert relay.request("GET", paths(stack)[0], profile="exposed").status == 200
        assert relay.logout("stack", "exposed") == 1
        session = [s for s in relay.status()["sessions"] if s["profile"] == "exposed"][0]
        assert session["refreshable"] is False and "expiresAt" not in session
        assert relay.token_get("stack", "exposed")["access_token"], "a new token after logout"


def test_async_token_get_and_logout(stack, real_bin, tmp_path):
    async def main():
        async with tokenrelay.AsyncRelay(config=_config(stack, tmp_path), binary=real_bin) as relay:
            token = await relay.token_get("stack", "exposed")
            assert token["access_token"]
            with pytest.raises(tokenrelay.UnknownProfile):
                await relay.token_get("stack", "nope")
            assert await relay.logout(all=True) >= 1

    asyncio.run(asyncio.wait_for(main(), 60))
