"""End to end against the interop stack (real authorization and resource servers).
Skipped unless TOKENRELAY_STACK_ENV names the stack's variables file."""

import asyncio

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
