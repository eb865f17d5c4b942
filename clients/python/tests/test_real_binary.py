"""The clients against the real tokenrelay binary (what it implements today: lifecycle,
cancellation, test/wait with TOKENRELAY_ENABLE_TEST_METHODS=1). Skipped when the binary
is not built."""

import asyncio
import os
import signal
import threading

import pytest
from conftest import pid_exists

import tokenrelay


def test_initialize_and_ping(real_bin):
    with tokenrelay.Relay(binary=real_bin) as relay:
        info = relay.initialize(clientInfo={"name": "pytest"})
        assert info["serverInfo"]["name"] == "tokenrelay" and "capabilities" in info
        relay.ping()
        with pytest.raises(tokenrelay.MethodNotFound):
            relay.call("no-such-method")
        with pytest.raises(tokenrelay.InvalidParams) as info:
            relay.call("initialize", {"processId": "x"})
        assert info.value.diagnostics[0]["pointer"] == "/processId"
        assert info.value.code == -32602


def test_hundred_concurrent_calls_from_threads(real_bin, test_environ):
    with tokenrelay.Relay(binary=real_bin, environ=test_environ) as relay:
        results = [None] * 100
        start = threading.Barrier(100)

        def worker(n):
            start.wait()
            results[n] = relay.call("test/wait", {"ms": 50, "echo": n}, timeout=60)["echo"]

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert results == list(range(100))


def test_hundred_concurrent_calls_from_tasks(real_bin, test_environ):
    async def main():
        async with tokenrelay.AsyncRelay(binary=real_bin, environ=test_environ) as relay:
            results = await asyncio.gather(*(relay.call("test/wait", {"ms": 50, "echo": n}) for n in range(100)))
            assert [r["echo"] for r in results] == list(range(100))
    asyncio.run(asyncio.wait_for(main(), 90))


def test_cancelled_slow_call_raises_cancelled(real_bin, test_environ):
    with tokenrelay.Relay(binary=real_bin, environ=test_environ) as relay:
        call = relay.start_call("test/wait", {"ms": 600000})
        call.cancel()
        with pytest.raises(tokenrelay.Cancelled) as info:
            call.result(timeout=30)
        assert info.value.code == -32800 and info.value.kind == "cancelled"


def test_client_timeout_raises_and_server_stays_usable(real_bin, test_environ):
    with tokenrelay.Relay(binary=real_bin, environ=test_environ) as relay:
        with pytest.raises(tokenrelay.RelayTimeout) as info:
            relay.call("test/wait", {"ms": 600000}, timeout=0.3)
        assert isinstance(info.value, TimeoutError)
        # The server got $/cancelRequest: its -32800 answer arrives and is dropped; the
        # process keeps serving and has nothing left in flight at shutdown.
        assert relay.call("test/wait", {"ms": 1, "echo": "after"}, timeout=30) == {"echo": "after"}
        assert relay.close() == 0


def test_async_task_cancellation_cancels_on_the_server(real_bin, test_environ):
    async def main():
        async with tokenrelay.AsyncRelay(binary=real_bin, environ=test_environ) as relay:
            task = asyncio.ensure_future(relay.call("test/wait", {"ms": 600000}))
            await relay.ping()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(tokenrelay.RelayTimeout):
                await relay.call("test/wait", {"ms": 600000}, timeout=0.3)
            await relay.ping()
        return relay.process.returncode
    # A clean exit 0 after shutdown shows no request was left hanging.
    assert asyncio.run(asyncio.wait_for(main(), 60)) == 0


def test_process_is_gone_after_close(real_bin):
    relay = tokenrelay.Relay(binary=real_bin)
    relay.ping()
    pid = relay.pid
    assert relay.close() == 0
    assert not pid_exists(pid)
    with pytest.raises(tokenrelay.RelayClosed):
        relay.ping()


def test_process_is_gone_after_async_close(real_bin):
    async def main():
        async with tokenrelay.AsyncRelay(binary=real_bin) as relay:
            await relay.ping()
        return relay.pid
    assert not pid_exists(asyncio.run(asyncio.wait_for(main(), 60)))


def test_close_with_requests_in_flight_still_ends_the_process(real_bin, test_environ):
    relay = tokenrelay.Relay(binary=real_bin, environ=test_environ)
    errors = []

    def slow():
        try:
            relay.call("test/wait", {"ms": 600000})
        except tokenrelay.RelayError as exc:
            errors.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    relay.ping()
    assert relay.close(timeout=4) == 0  # in-flight calls are cancelled, not waited for
    thread.join(30)
    assert not pid_exists(relay.pid)
    assert len(errors) == 1 and isinstance(errors[0], (tokenrelay.RelayClosed, tokenrelay.Cancelled))


def test_killed_binary_raises_relay_closed_instead_of_hanging(real_bin, test_environ):
    with tokenrelay.Relay(binary=real_bin, environ=test_environ) as relay:
        relay.ping()
        outcome = {}

        def slow():
            try:
                relay.call("test/wait", {"ms": 600000})
            except tokenrelay.RelayError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=slow)
        thread.start()
        relay.call("test/wait", {"ms": 1})
        os.kill(relay.pid, signal.SIGKILL)
        thread.join(30)
        assert isinstance(outcome.get("error"), tokenrelay.RelayClosed)
        assert outcome["error"].returncode == -signal.SIGKILL
        with pytest.raises(tokenrelay.RelayClosed):
            relay.ping()
    assert not pid_exists(relay.pid)


def test_async_killed_binary_raises_relay_closed(real_bin, test_environ):
    async def main():
        async with tokenrelay.AsyncRelay(binary=real_bin, environ=test_environ) as relay:
            slow = asyncio.ensure_future(relay.call("test/wait", {"ms": 600000}))
            await relay.ping()
            os.kill(relay.pid, signal.SIGKILL)
            with pytest.raises(tokenrelay.RelayClosed):
                await slow
            with pytest.raises(tokenrelay.RelayClosed):
                await relay.ping()
    asyncio.run(asyncio.wait_for(main(), 60))


SESSIONS_CONFIG = """\
version: 1
store: {type: memory}
environments:
  local:
    base_url: http://127.0.0.1:9
    profiles:
      me:
        type: authorization_code
        client_id: cli
        authorization_url: http://127.0.0.1:9/authorize
        token_url: http://127.0.0.1:9/token
"""


def test_async_session_watch_tells_a_login_required_and_a_paste_is_checked(real_bin, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(SESSIONS_CONFIG)

    async def main():
        async with tokenrelay.AsyncRelay(binary=real_bin, config=str(config)) as relay:
            watch = await relay.watch_sessions(profile="me")
            assert [(s["profile"], s["state"]) for s in watch.sessions] == [("me", "none")]
            login = asyncio.ensure_future(relay.login(profile="me"))
            change = await asyncio.wait_for(watch.__anext__(), 60)
            assert isinstance(change, tokenrelay.SessionChange)
            assert (change.environment, change.profile, change.reason) == ("local", "me", "login-required")
            assert change.needs_login
            assert change.login["url"].startswith("http://127.0.0.1:9/authorize?")
            # A pasted URL that is not this login's callback is refused; the login goes on.
            with pytest.raises(tokenrelay.InvalidParams):
                await relay.login_complete("http://127.0.0.1:1/cb?code=x&state=y", profile="me")
            assert not login.done()
            login.cancel()
            await watch.close()
            assert [c async for c in watch] == []

    asyncio.run(asyncio.wait_for(main(), 90))
