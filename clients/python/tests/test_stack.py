"""End to end against the interop stack (real authorization and resource servers).
Skipped unless TOKENRELAY_STACK_ENV names the stack's variables file."""

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from stack_config import paths, write_config

import tokenrelay


@pytest.fixture
def relay(stack, real_bin, tmp_path):
    with tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
        yield relay


@pytest.fixture
def path(stack):
    return paths(stack)[0]


@pytest.fixture
def sse_path(stack):
    return paths(stack)[1]


def test_authenticated_request(relay, path):
    response = relay.request("GET", path, timeout=30)
    assert response.status == 200


def test_hundred_concurrent_requests(stack, real_bin, tmp_path, path):
    async def main():
        async with tokenrelay.AsyncRelay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
            responses = await asyncio.gather(*(relay.request("GET", path, timeout=60) for _ in range(100)))
            assert {r.status for r in responses} == {200}
    asyncio.run(asyncio.wait_for(main(), 120))


def _renewals(status):
    session = [s for s in status["sessions"] if s["environment"] == "stack" and s["profile"] == "service"][0]
    counters = session["counters"]
    return counters.get("acquisitions", 0) + counters.get("renewals", 0)


def test_invalidate_then_renewal_is_seen_in_status(relay, path):
    assert relay.request("GET", path).status == 200
    before = _renewals(relay.status())
    assert relay.invalidate("stack", "service") == 1
    assert relay.request("GET", path).status == 200
    assert _renewals(relay.status()) == before + 1


def test_subscription_yields_events_then_closes(relay, sse_path):
    states = []
    with relay.subscribe(sse_path, on_state=states.append) as sub:
        events = [sub.get(timeout=30) for _ in range(2)]
    assert all(isinstance(e.data, str) for e in events)
    assert "open" in [s.state for s in states]
    assert list(sub) == []


def test_unknown_environment(relay, path):
    with pytest.raises(tokenrelay.UnknownEnvironment):
        relay.request("GET", path, environment="nope")


def test_unknown_profile(relay, path):
    with pytest.raises(tokenrelay.UnknownProfile):
        relay.request("GET", path, profile="nope")


def test_refused_credentials_raise_auth_error(relay, path):
    with pytest.raises(tokenrelay.AuthError) as info:
        relay.request("GET", path, profile="bad")
    assert info.value.oauth_error == "invalid_client"


def test_connection_refused_raises_transport_error(relay):
    with pytest.raises(tokenrelay.TransportError):
        relay.request("GET", "/", environment="closed", auth=False, timeout=10)


def test_invalid_params(relay):
    with pytest.raises(tokenrelay.InvalidParams) as info:
        relay.call("request", {"path": "/", "method": 5})
    assert info.value.diagnostics


# Logging in as a person (device code at the real AS; approve_device.py plays the person) ----

APPROVE_DEVICE = str(Path(__file__).resolve().parents[2] / "neovim" / "test" / "approve_device.py")


def _approve(stack, prompt):
    """What the person does with the prompt: signs in at the AS, enters the code, accepts."""
    return subprocess.Popen([sys.executable, APPROVE_DEVICE, stack["AS_URL"], prompt.user_code])


def test_request_before_login_needs_interaction(relay, path):
    with pytest.raises(tokenrelay.InteractionRequired) as info:
        relay.request("GET", path, profile="tv", timeout=30)
    assert info.value.kind == "interaction_required"
    assert info.value.data["login"] is True


def test_device_login_then_request_as_the_person(relay, stack, path):
    prompts, approvers = [], []

    def on_prompt(prompt):
        prompts.append(prompt)
        approvers.append(_approve(stack, prompt))

    try:
        result = relay.login("stack", "tv", on_prompt=on_prompt, timeout=120)
        assert [approver.wait(30) for approver in approvers] == [0]
    finally:
        for approver in approvers:
            approver.kill()
    assert result["loggedIn"] is True and result["profile"] == "tv"
    [prompt] = prompts
    assert isinstance(prompt, tokenrelay.AuthPrompt)
    assert (prompt.environment, prompt.profile, prompt.kind) == ("stack", "tv", "device")
    assert prompt.url.startswith(stack["AS_URL"]) and prompt.user_code and prompt.expires_at
    response = relay.request("GET", path, profile="tv", timeout=30)
    assert response.status == 200
    assert response.json()["username"] == "alice"
    assert response.json()["client_id"] == "tv"


def test_async_device_login_with_the_general_prompt_hook(stack, real_bin, tmp_path, path):
    hooked, approvers = [], []

    def on_auth_prompt(prompt):  # a login started by anyone on this relay
        hooked.append(prompt)
        approvers.append(_approve(stack, prompt))

    async def main():
        async with tokenrelay.AsyncRelay(config=write_config(stack, tmp_path), binary=real_bin,
                                         on_auth_prompt=on_auth_prompt) as relay:
            with pytest.raises(tokenrelay.InteractionRequired) as info:
                await relay.request("GET", path, profile="tv", timeout=30)
            assert info.value.data["login"] is True
            result = await relay.login(profile="tv", timeout=120)
            assert result["loggedIn"] is True
            response = await relay.request("GET", path, profile="tv", timeout=30)
            assert response.status == 200 and response.json()["username"] == "alice"

    try:
        asyncio.run(asyncio.wait_for(main(), 180))
        assert [approver.wait(30) for approver in approvers] == [0]
    finally:
        for approver in approvers:
            approver.kill()
    assert [p.kind for p in hooked] == ["device"]


def test_login_timeout_cancels_the_login(relay):
    with pytest.raises(tokenrelay.RelayTimeout):
        relay.login("stack", "tv", timeout=0.5)  # nobody approves: the client gives up and cancels
    relay.ping(timeout=10)  # the process keeps serving



def test_cancelled_logins_count_then_limit(stack, real_bin, tmp_path):
    prompted = threading.Semaphore(0)
    with tokenrelay.Relay(config=write_config(stack, tmp_path), binary=real_bin,
                          on_auth_prompt=lambda prompt: prompted.release()) as relay:
        for _ in range(3):  # each cancelled login is a failed attempt (SPEC 5.4: at most 3 per 10 minutes)
            call = relay.start_call("login", {"environment": "stack", "profile": "tv"})
            assert prompted.acquire(timeout=30), "no auth-prompt"
            call.cancel()
            with pytest.raises(tokenrelay.Cancelled):
                call.result(timeout=30)
        with pytest.raises(tokenrelay.LimitExceeded) as info:
            relay.login("stack", "tv", timeout=30)
        assert info.value.kind == "limit"


def test_until_closed_ends_the_iteration_when_the_server_ends_the_stream(relay, sse_path):
    states = []
    with relay.subscribe(sse_path, query={"count": 3, "interval": 0}, until_closed=True,
                         on_state=states.append) as sub:
        events = list(sub)  # ends: the server's clean end closes the subscription
    assert [e.id for e in events] == ["1", "2", "3"]
    assert states[-1].state == "closed" and states[-1].error is None
    assert "reconnecting" not in [s.state for s in states]


def test_until_closed_ends_an_async_iteration_too(stack, real_bin, tmp_path, sse_path):
    async def main():
        async with tokenrelay.AsyncRelay(config=write_config(stack, tmp_path), binary=real_bin) as relay:
            sub = await relay.subscribe(sse_path, query={"count": 3, "interval": 0}, until_closed=True)
            return [event.id async for event in sub]
    assert asyncio.run(asyncio.wait_for(main(), 120)) == ["1", "2", "3"]
